package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/segmentio/kafka-go/compress"
)

// Decompression of fetched record batches (zstd and lz4; gzip and snappy
// keep kafka-go's codecs).
//
// kafka-go's codecs stream each batch through a decoder taken from a
// sync.Pool: the lz4 reader allocates a buffer of the frame's declared
// block size (4 MiB for kafka-go's own producer) and the zstd decoder its
// window, and a sync.Pool is emptied at every GC cycle. A reader near its
// heap limit collected often, so nearly every batch allocated its decoder
// anew, which in turn triggered the next collection: hundreds of cycles
// for a day of records. Here a batch is read whole and decompressed in one
// call into a buffer the size of its content, and the buffers sit in a
// bounded free list (not a sync.Pool), so they survive collections and
// their total stays bounded: at most decodeBuffers are kept, each under
// keptDecodeBytes.
//
// The batch's CRC-32C (checked over the compressed bytes before anything
// is decoded: nextBatch, and kafka-go on its own path) covers what was
// fetched; the lz4 frame's optional xxHash checksums and the zstd frame's
// content checksum are not verified again.
const (
	decodeBuffers   = 8
	keptDecodeBytes = 4 << 20
	// maxDecodedBatch bounds what one batch may decompress to: a corrupt
	// or hostile batch fails instead of exhausting memory.
	maxDecodedBatch = 1 << 30
)

func init() {
	zc := &batchCodec{Codec: compress.Zstd.Codec(), decode: decodeZstd}
	lc := &batchCodec{Codec: compress.Lz4.Codec(), decode: decodeLz4}
	compress.Codecs[compress.Zstd] = zc
	compress.Codecs[compress.Lz4] = lc
}

// zstdDecoder decodes whole frames (DecodeAll is safe for concurrent use);
// it keeps its state between batches, unlike a pooled streaming decoder.
// It skips the frames' content checksums (XXH64 of the decoded bytes, 3 %
// of replay's CPU on a zstd topic), which the batch's CRC-32C makes
// redundant (see above).
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(maxDecodedBatch),
	zstd.IgnoreChecksum(true))

// batchCodec is a compress.Codec whose readers decompress a record batch
// at once; writers are the wrapped codec's (the kafka sink's producer).
type batchCodec struct {
	compress.Codec
	decode func(dst, src []byte) ([]byte, error)
}

type decodeBuf struct{ in, out []byte }

var decodeFree = make(chan *decodeBuf, decodeBuffers)

func getDecodeBuf() *decodeBuf {
	select {
	case b := <-decodeFree:
		return b
	default:
		return &decodeBuf{}
	}
}

func putDecodeBuf(b *decodeBuf) {
	if cap(b.in) > keptDecodeBytes || cap(b.out) > keptDecodeBytes {
		return // a rare large batch: let the GC have it
	}
	b.in, b.out = b.in[:0], b.out[:0]
	select {
	case decodeFree <- b:
	default:
	}
}

// NewReader returns a reader of the decompressed batch read from r.
func (c *batchCodec) NewReader(r io.Reader) io.ReadCloser {
	return &batchReader{src: r, decode: c.decode}
}

type batchReader struct {
	src    io.Reader
	decode func(dst, src []byte) ([]byte, error)
	buf    *decodeBuf
	rest   []byte
	done   bool
	err    error
}

func (r *batchReader) fill() error {
	if r.done {
		return r.err
	}
	r.done = true
	r.buf = getDecodeBuf()
	in, err := readAll(r.buf.in, r.src)
	r.buf.in = in
	if err == nil {
		r.buf.out, err = r.decode(r.buf.out[:0], in)
	}
	if err != nil {
		r.err = fmt.Errorf("decompress record batch: %w", err)
		return r.err
	}
	r.rest = r.buf.out
	return nil
}

// Read implements io.Reader.
func (r *batchReader) Read(p []byte) (int, error) {
	if err := r.fill(); err != nil {
		return 0, err
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// WriteTo implements io.WriterTo.
func (r *batchReader) WriteTo(w io.Writer) (int64, error) {
	if err := r.fill(); err != nil {
		return 0, err
	}
	n, err := w.Write(r.rest)
	r.rest = r.rest[n:]
	return int64(n), err
}

// Close gives the buffers back.
func (r *batchReader) Close() error {
	if r.buf != nil {
		putDecodeBuf(r.buf)
		r.buf, r.rest = nil, nil
	}
	r.done, r.err = true, io.ErrClosedPipe
	return nil
}

// readAll appends all of r to buf[:0].
func readAll(buf []byte, r io.Reader) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(4<<10, cap(buf)))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func decodeZstd(dst, src []byte) ([]byte, error) {
	if zstdDecoder == nil {
		return nil, errors.New("zstd decoder unavailable")
	}
	return zstdDecoder.DecodeAll(src, dst)
}

// LZ4 frame format (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md),
// which Kafka's lz4 codec uses for record batches of magic 2.
const (
	lz4Magic          = 0x184D2204
	lz4SkippableMagic = 0x184D2A50 // to 0x184D2A5F
	lz4History        = 64 << 10   // linked blocks refer up to 64 KiB back
)

var errLz4Frame = errors.New("lz4: malformed frame")

// decodeLz4 decompresses the lz4 frames of src into dst.
func decodeLz4(dst, src []byte) ([]byte, error) {
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errLz4Frame
		}
		magic := binary.LittleEndian.Uint32(src)
		src = src[4:]
		if magic&0xFFFFFFF0 == lz4SkippableMagic {
			if len(src) < 4 || uint64(binary.LittleEndian.Uint32(src)) > uint64(len(src)-4) {
				return dst, errLz4Frame
			}
			src = src[4+binary.LittleEndian.Uint32(src):]
			continue
		}
		if magic != lz4Magic {
			return dst, fmt.Errorf("lz4: not an lz4 frame (magic %#x)", magic)
		}
		var err error
		if dst, src, err = decodeLz4Frame(dst, src); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func decodeLz4Frame(dst, src []byte) ([]byte, []byte, error) {
	if len(src) < 3 {
		return dst, src, errLz4Frame
	}
	flg, bd := src[0], src[1]
	if flg>>6 != 1 {
		return dst, src, fmt.Errorf("lz4: frame version %d, want 1", flg>>6)
	}
	independent, blockSum, contentSize, contentSum, dictID := flg&0x20 != 0, flg&0x10 != 0, flg&0x08 != 0, flg&0x04 != 0, flg&0x01 != 0
	if dictID {
		return dst, src, errors.New("lz4: frames with a dictionary are not supported")
	}
	blockMax := 0
	switch (bd >> 4) & 7 {
	case 4:
		blockMax = 64 << 10
	case 5:
		blockMax = 256 << 10
	case 6:
		blockMax = 1 << 20
	case 7:
		blockMax = 4 << 20
	default:
		return dst, src, errLz4Frame
	}
	hdr := 3 // FLG, BD, HC
	if contentSize {
		hdr += 8
	}
	if len(src) < hdr {
		return dst, src, errLz4Frame
	}
	if contentSize {
		if n := binary.LittleEndian.Uint64(src[2:]); n <= maxDecodedBatch {
			dst = slices.Grow(dst, int(n))
		}
	}
	src = src[hdr:]
	start := len(dst)
	for {
		if len(src) < 4 {
			return dst, src, errLz4Frame
		}
		size := binary.LittleEndian.Uint32(src)
		src = src[4:]
		if size == 0 { // EndMark
			break
		}
		raw := size&0x80000000 != 0
		n := int(size & 0x7FFFFFFF)
		if n > len(src) || n > blockMax {
			return dst, src, errLz4Frame
		}
		block := src[:n]
		src = src[n:]
		if blockSum {
			if len(src) < 4 {
				return dst, src, errLz4Frame
			}
			src = src[4:]
		}
		if len(dst)-start+blockMax > maxDecodedBatch {
			return dst, src, fmt.Errorf("lz4: batch decompresses to more than %d bytes", maxDecodedBatch)
		}
		if raw {
			dst = append(dst, block...)
			continue
		}
		var err error
		if dst, err = lz4Block(dst, block, start, independent, blockMax); err != nil {
			return dst, src, err
		}
	}
	if contentSum {
		if len(src) < 4 {
			return dst, src, errLz4Frame
		}
		src = src[4:]
	}
	return dst, src, nil
}

// lz4Block appends the decompressed block to dst; a linked block may refer
// to the frame's output before it (from start on).
func lz4Block(dst, block []byte, start int, independent bool, blockMax int) ([]byte, error) {
	free := min(blockMax, max(4*len(block), 64<<10))
	for {
		dst = slices.Grow(dst, free)
		out := dst[len(dst) : len(dst)+free]
		var n int
		var err error
		if independent {
			n, err = lz4.UncompressBlock(block, out)
		} else {
			n, err = lz4.UncompressBlockWithDict(block, out, dst[max(start, len(dst)-lz4History):])
		}
		if err == nil {
			return dst[:len(dst)+n], nil
		}
		if free >= blockMax {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		free = blockMax // the output did not fit: the block is at most blockMax
	}
}
