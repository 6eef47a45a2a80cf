package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/segmentio/kafka-go/compress/gzip"
	"github.com/segmentio/kafka-go/compress/snappy"
)

// Decompression of record batches: zstd and lz4 here, gzip and snappy
// (xerial framing) with kafka-go's codecs, called as values.
//
// A streaming decoder taken from a sync.Pool (kafka-go's codecs) allocates
// its buffers again after every GC cycle (the lz4 reader one of the
// frame's declared block size, 4 MiB for kafka-go's own producer; the zstd
// decoder its window), and a reader near its heap limit collects often,
// each allocation bringing the next collection nearer. Here a zstd or lz4
// batch is decompressed whole, in one call, into a Buffer the size of its
// content, and the buffers sit in a bounded free list (DecodeBuffers, not
// a sync.Pool), so they survive collections and their total stays
// bounded: at most decodeBuffers are kept, each under KeptBytes. The
// frames' own checksums are not verified: the batch's CRC-32C, checked by
// NextBatch before anything is decoded, covers what was fetched.
const (
	decodeBuffers = 8
	// KeptBytes is the largest buffer a free list keeps (4 MiB): a larger
	// one, for a rare large batch, is left to the GC.
	KeptBytes = 4 << 20
	// MaxDecodedBatch bounds what one batch may decompress to (1 GiB): a
	// corrupt or hostile batch fails instead of exhausting memory.
	MaxDecodedBatch = 1 << 30
)

// zstdDecoder decodes whole frames (DecodeAll is safe for concurrent use);
// it keeps its state between batches, unlike a pooled streaming decoder.
// It skips the frames' content checksums (XXH64 of the decoded bytes, 3 %
// of replay's CPU on a zstd topic), which the batch's CRC-32C makes
// redundant.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(MaxDecodedBatch),
	zstd.IgnoreChecksum(true))

// gzipCodec and snappyCodec are kafka-go's codecs for gzip and snappy
// batches, used as values.
var (
	gzipCodec   = &gzip.Codec{}
	snappyCodec = &snappy.Codec{}
)

// Buffer holds bytes that outlive GC cycles: a decompressed records
// section, a fetch response. Take one from a Buffers free list and give
// it back once nothing read from it is used.
type Buffer struct{ B []byte }

// Buffers is a bounded free list of Buffers (not a sync.Pool, which a GC
// cycle empties).
type Buffers chan *Buffer

// Get returns a recycled Buffer, or a new one.
func (l Buffers) Get() *Buffer {
	select {
	case b := <-l:
		return b
	default:
		return &Buffer{}
	}
}

// Put gives b back to l (unless it grew past KeptBytes: a rare large
// batch is left to the GC).
func (l Buffers) Put(b *Buffer) {
	if cap(b.B) > KeptBytes {
		return
	}
	b.B = b.B[:0]
	select {
	case l <- b:
	default:
	}
}

// DecodeBuffers is the free list of the buffers Decompress writes to.
var DecodeBuffers = make(Buffers, decodeBuffers)

// Decompress returns b's records section uncompressed: b.Records itself
// when the batch is not compressed, else its content decompressed into
// buf. An unknown codec, a malformed stream, or content larger than
// MaxDecodedBatch is an error.
func (b *Batch) Decompress(buf *Buffer) ([]byte, error) {
	c := b.Attrs & AttrCompression
	var err error
	switch c {
	case 0:
		return b.Records, nil
	case 1:
		buf.B, err = readAll(buf.B, gzipCodec.NewReader(bytes.NewReader(b.Records)))
	case 2:
		buf.B, err = readAll(buf.B, snappyCodec.NewReader(bytes.NewReader(b.Records)))
	case 3:
		buf.B, err = DecodeLz4(buf.B[:0], b.Records)
	case 4:
		buf.B, err = DecodeZstd(buf.B[:0], b.Records)
	default:
		return nil, fmt.Errorf("unsupported compression codec (%d)", c)
	}
	if err != nil {
		return nil, fmt.Errorf("decompress record batch: %w", err)
	}
	if len(buf.B) > MaxDecodedBatch {
		return nil, fmt.Errorf("record batch at offset %d decompresses to more than %d bytes", b.Base, MaxDecodedBatch)
	}
	return buf.B, nil
}

// readAll appends zr's content to buf[:0], at most MaxDecodedBatch+1
// bytes (Decompress refuses more: a batch that decompresses without bound
// cannot exhaust memory), and closes zr.
func readAll(buf []byte, zr io.ReadCloser) ([]byte, error) {
	defer zr.Close()
	b := bytes.NewBuffer(buf[:0])
	_, err := b.ReadFrom(io.LimitReader(zr, MaxDecodedBatch+1))
	return b.Bytes(), err
}

// DecodeZstd appends the content of the zstd frames of src to dst.
func DecodeZstd(dst, src []byte) ([]byte, error) {
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

// DecodeLz4 appends the content of the lz4 frames of src to dst (at most
// MaxDecodedBatch bytes). Frames with a dictionary id are refused;
// checksums are not verified.
func DecodeLz4(dst, src []byte) ([]byte, error) {
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
	if (bd>>4)&7 < 4 { // block maximum sizes 4 to 7: 64 KiB, 256 KiB, 1 MiB, 4 MiB
		return dst, src, errLz4Frame
	}
	blockMax := 1 << (2*((bd>>4)&7) + 8)
	hdr := 3 // FLG, BD, HC
	if contentSize {
		hdr += 8
	}
	if len(src) < hdr {
		return dst, src, errLz4Frame
	}
	if contentSize {
		if n := binary.LittleEndian.Uint64(src[2:]); n <= MaxDecodedBatch {
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
		if len(dst)-start+blockMax > MaxDecodedBatch {
			return dst, src, fmt.Errorf("lz4: batch decompresses to more than %d bytes", MaxDecodedBatch)
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
