package parquet

import (
	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// zstdWindow is the window of the sink's zstd encoder, whose history is
// twice its window (the default 8 MiB window made the encoders, one per
// column, most of the sink's memory). Pages, cut at 256 KiB, fit in it,
// so they compress to the same bytes as under the default window (a
// 256 KiB window would not: the frame's header differs); a larger page
// only finds no matches further back than the window.
const zstdWindow = 512 << 10

// zstdCodec is zstd at the default level (level 3) with a zstdWindow
// window; decoding is parquet-go's.
type zstdCodec struct {
	zstd.Codec
}

// zstdEncoders keeps two encoders between pages (a sync.Pool would drop
// them at every garbage collection, and a new one allocates its history
// again); more are made when needed and dropped after.
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
