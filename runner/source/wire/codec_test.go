package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/segmentio/kafka-go/compress"
	kgzip "github.com/segmentio/kafka-go/compress/gzip"
	klz4 "github.com/segmentio/kafka-go/compress/lz4"
	ksnappy "github.com/segmentio/kafka-go/compress/snappy"
	kzstd "github.com/segmentio/kafka-go/compress/zstd"
)

// The compression codecs of a batch's attributes.
const (
	attrGzip   int16 = 1
	attrSnappy int16 = 2
	attrLz4    int16 = 3
	attrZstd   int16 = 4
)

// batchPayloads are record-batch bodies: empty, small, repetitive, random
// and larger than every lz4 block size.
func batchPayloads() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var orders bytes.Buffer
	for i := 0; orders.Len() < 1500<<10; i++ {
		fmt.Fprintf(&orders, `{"id":"ord-%d","status":"paid","amount":%d.%02d}`, i, rng.IntN(1000), rng.IntN(100))
	}
	return [][]byte{{}, []byte("x"), bytes.Repeat([]byte("abc"), 100_000), random, orders.Bytes()}
}

// decodeBatch decompresses a records section of codec c (the attributes'
// compression bits) as the reader does.
func decodeBatch(t *testing.T, c int16, compressed []byte) []byte {
	t.Helper()
	buf := DecodeBuffers.Get()
	defer DecodeBuffers.Put(buf)
	b := Batch{Attrs: c, Records: compressed}
	got, err := b.Decompress(buf)
	if err != nil {
		t.Fatalf("codec %d: %v", c, err)
	}
	return bytes.Clone(got)
}

// The lz4 decoder reads the frames every producer writes: independent and
// linked blocks, every block size, with and without checksums and content
// size, several frames in a row.
func TestLz4BatchDecoder(t *testing.T) {
	codec := &klz4.Codec{}
	for _, p := range batchPayloads() {
		for _, size := range []lz4.BlockSize{lz4.Block64Kb, lz4.Block256Kb, lz4.Block1Mb, lz4.Block4Mb} {
			for _, opts := range [][]lz4.Option{
				{lz4.BlockChecksumOption(false), lz4.ChecksumOption(true)},
				{lz4.BlockChecksumOption(true), lz4.ChecksumOption(false), lz4.SizeOption(uint64(len(p)))},
				{lz4.ConcurrencyOption(1), lz4.CompressionLevelOption(lz4.Level4)},
			} {
				var buf bytes.Buffer
				w := lz4.NewWriter(&buf)
				if err := w.Apply(append([]lz4.Option{lz4.BlockSizeOption(size)}, opts...)...); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(p); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				frame := buf.Bytes()
				if got := decodeBatch(t, attrLz4, frame); !bytes.Equal(got, p) {
					t.Fatalf("%d bytes, block %s: decoded %d bytes that differ", len(p), size, len(got))
				}
				two := append(append([]byte(nil), frame...), frame...)
				if got := decodeBatch(t, attrLz4, two); !bytes.Equal(got, append(append([]byte(nil), p...), p...)) {
					t.Fatalf("%d bytes twice, block %s: two frames in a row decode wrong", len(p), size)
				}
			}
		}
		// kafka-go's own producer (the kafka sink, the sandbox's seeding).
		var buf bytes.Buffer
		w := codec.NewWriter(&buf)
		_, _ = w.Write(p)
		_ = w.Close()
		if got := decodeBatch(t, attrLz4, buf.Bytes()); !bytes.Equal(got, p) {
			t.Fatalf("kafka-go lz4 writer, %d bytes: decoded wrong", len(p))
		}
	}
}

// Linked blocks (block independence off, which the frame format allows)
// refer to the output of earlier blocks: the second block here is a match
// 16 bytes back, into the first.
func TestLz4LinkedBlocks(t *testing.T) {
	first := []byte("0123456789abcdef")
	frame := []byte{0x04, 0x22, 0x4D, 0x18, 0x40, 0x40, 0xC0} // magic; FLG version 1, linked, no checksums; BD 64 KiB; HC (unchecked)
	frame = append(frame, byte(len(first)), 0, 0, 0x80)       // an uncompressed block
	frame = append(frame, first...)
	second := []byte{0x0F, 16, 0, 1, 0x50, 'v', 'w', 'x', 'y', 'z'} // no literals, a match of 4+15+1 at offset 16; 5 literals
	frame = append(frame, byte(len(second)), 0, 0, 0)
	frame = append(frame, second...)
	frame = append(frame, 0, 0, 0, 0)
	want := append([]byte(nil), first...)
	for range 20 {
		want = append(want, want[len(want)-16])
	}
	want = append(want, "vwxyz"...)
	if got := decodeBatch(t, attrLz4, frame); !bytes.Equal(got, want) {
		t.Fatalf("linked blocks: decoded %q, want %q", got, want)
	}
}

// gzip and snappy batches decode with kafka-go's codecs, as kafka-go's
// producers (the kafka sink, the sandbox's seeding) write them.
func TestGzipSnappyBatchDecoder(t *testing.T) {
	for _, c := range []struct {
		attrs int16
		codec compress.Codec
	}{{attrGzip, &kgzip.Codec{}}, {attrSnappy, &ksnappy.Codec{}}} {
		for _, p := range batchPayloads() {
			var buf bytes.Buffer
			w := c.codec.NewWriter(&buf)
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := decodeBatch(t, c.attrs, buf.Bytes()); !bytes.Equal(got, p) {
				t.Fatalf("%s, %d bytes: decoded %d bytes that differ", c.codec.Name(), len(p), len(got))
			}
		}
		b := Batch{Attrs: c.attrs, Records: []byte("not compressed")}
		if _, err := b.Decompress(&Buffer{}); err == nil {
			t.Errorf("%s: garbage decoded without an error", c.codec.Name())
		}
	}
	b := Batch{Attrs: 5, Records: []byte("x")}
	if _, err := b.Decompress(&Buffer{}); err == nil || !strings.Contains(err.Error(), "unsupported compression codec (5)") {
		t.Errorf("codec 5: %v, want unsupported", err)
	}
}

func TestLz4BatchDecoderRejectsGarbage(t *testing.T) {
	for _, in := range [][]byte{
		{1, 2, 3},
		{0x04, 0x22, 0x4D, 0x18, 0x60, 0x70}, // header cut short
		{0x04, 0x22, 0x4D, 0x18, 0x60, 0x70, 0x73, 0xFF, 0, 0, 0},                // block longer than the input
		{0x04, 0x22, 0x4D, 0x18, 0x60, 0x70, 0x73, 3, 0, 0, 0, 0xF0, 0xFF, 0xFF}, // no end mark
		{0x04, 0x22, 0x4D, 0x18, 0x61, 0x70, 0x73, 0, 0, 0, 0},                   // dictionary id
	} {
		b := Batch{Attrs: attrLz4, Records: in}
		if _, err := b.Decompress(&Buffer{}); err == nil {
			t.Errorf("%x: decoded without an error", in)
		}
	}
}

func TestZstdBatchDecoder(t *testing.T) {
	for _, p := range batchPayloads() {
		for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBestCompression} {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithWindowSize(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			frame := enc.EncodeAll(p, nil)
			if got := decodeBatch(t, attrZstd, frame); !bytes.Equal(got, p) {
				t.Fatalf("%d bytes, level %s: decoded wrong", len(p), level)
			}
			two := append(append([]byte(nil), frame...), frame...)
			if got := decodeBatch(t, attrZstd, two); !bytes.Equal(got, append(append([]byte(nil), p...), p...)) {
				t.Fatalf("two frames: decoded wrong")
			}
		}
		// kafka-go's own zstd writer (streaming frames).
		var buf bytes.Buffer
		w := (&kzstd.Codec{}).NewWriter(&buf)
		_, _ = w.Write(p)
		_ = w.Close()
		if got := decodeBatch(t, attrZstd, buf.Bytes()); !bytes.Equal(got, p) {
			t.Fatalf("kafka-go zstd writer, %d bytes: decoded wrong", len(p))
		}
	}
	b := Batch{Attrs: attrZstd, Records: []byte("not zstd")}
	if _, err := b.Decompress(&Buffer{}); err == nil {
		t.Error("garbage decoded without an error")
	}
}

// BenchmarkBatchDecode decompresses a batch whole into a recycled Buffer
// (batch) and streams it through kafka-go's codec (kafka-go).
func BenchmarkBatchDecode(b *testing.B) {
	p := batchPayloads()[4][:600<<10] // about one seeded batch of 2000 orders
	for _, c := range []struct {
		name  string
		attrs int16
		codec compress.Codec
	}{{"lz4", attrLz4, &klz4.Codec{}}, {"zstd", attrZstd, &kzstd.Codec{}}} {
		var buf bytes.Buffer
		w := c.codec.NewWriter(&buf)
		_, _ = w.Write(p)
		_ = w.Close()
		b.Run(c.name+"/batch", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			batch := Batch{Attrs: c.attrs, Records: buf.Bytes()}
			for b.Loop() {
				out := DecodeBuffers.Get()
				if _, err := batch.Decompress(out); err != nil {
					b.Fatal(err)
				}
				DecodeBuffers.Put(out)
			}
		})
		b.Run(c.name+"/kafka-go", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			out := make([]byte, 64<<10)
			for b.Loop() {
				r := c.codec.NewReader(bytes.NewReader(buf.Bytes()))
				for {
					if _, err := r.Read(out); err != nil {
						break
					}
				}
				r.Close()
			}
		})
	}
}

// The lz4 frame decoder meets bytes a broker served: whatever they are,
// it returns an error or output, never a panic, and never more than
// MaxDecodedBatch.
func FuzzDecodeLz4(f *testing.F) {
	var frame bytes.Buffer
	w := lz4.NewWriter(&frame)
	_, _ = w.Write(bytes.Repeat([]byte(`{"id":1,"status":"paid"}`), 200))
	_ = w.Close()
	f.Add(frame.Bytes())
	f.Add([]byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82})
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := DecodeLz4(nil, src)
		if err == nil && len(out) > MaxDecodedBatch {
			t.Fatalf("%d bytes decoded", len(out))
		}
	})
}
