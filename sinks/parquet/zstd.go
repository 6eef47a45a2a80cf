package parquet

import (
	"sync"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// zstdWindow is the window of the sink's zstd encoder. The encoder's
// history is twice its window: the library's default window (8 MiB)
// gives every encoder 16 MiB of history, one per column written at the
// same time, which was most of the sink's memory. A page is far smaller
// than 1 MiB (the writer cuts pages at 256 KiB), so the same pages
// compress to the same bytes; a larger page (a value above 1 MiB) only
// finds no matches further back than 1 MiB.
const zstdWindow = 1 << 20

// zstdCodec is zstd at the default level (level 3) with a zstdWindow
// window; decoding is parquet-go's.
type zstdCodec struct {
	zstd.Codec
	encoders sync.Pool
}

// Encode compresses src into dst as one zstd frame.
func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	e, _ := c.encoders.Get().(*kzstd.Encoder)
	if e == nil {
		var err error
		e, err = kzstd.NewWriter(nil, kzstd.WithEncoderConcurrency(1), kzstd.WithEncoderLevel(kzstd.SpeedDefault),
			kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false), kzstd.WithWindowSize(zstdWindow))
		if err != nil {
			return dst, err
		}
	}
	defer c.encoders.Put(e)
	return e.EncodeAll(src, dst[:0]), nil
}
