package parquet

import (
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// zstdWindow is the window of the sink's zstd encoder. The encoder's
// history is twice its window: the library's default window (8 MiB)
// gives every encoder 16 MiB of history, one per column written at the
// same time, which was most of the sink's memory. A page is smaller than
// 512 KiB (the writer cuts pages at 256 KiB), so the same pages compress
// to the same bytes (256 KiB, the page's own size, does not: the frame's
// header then differs); a larger page (a value above 512 KiB) only finds
// no matches further back than 512 KiB.
const zstdWindow = 512 << 10

// zstdCodec is zstd at the default level (level 3) with a zstdWindow
// window; decoding is parquet-go's.
type zstdCodec struct {
	zstd.Codec
}

// zstdEncoders keeps the encoders between pages: a sync.Pool would drop
// them at every garbage collection, and a new encoder allocates its
// history and tables again (most of what the sink allocated). Two are
// kept, the objects being built at once being few; more are made when
// needed and dropped after.
var zstdEncoders = make(chan *kzstd.Encoder, 2)

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	var e *kzstd.Encoder
	select {
	case e = <-zstdEncoders:
	default:
		var err error
		e, err = kzstd.NewWriter(nil, kzstd.WithEncoderConcurrency(1), kzstd.WithEncoderLevel(kzstd.SpeedDefault),
			kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false), kzstd.WithWindowSize(zstdWindow))
		if err != nil {
			return dst, err
		}
	}
	out := e.EncodeAll(src, dst[:0])
	select {
	case zstdEncoders <- e:
	default:
	}
	return out, nil
}
