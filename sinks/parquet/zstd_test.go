package parquet

import (
	"bytes"
	"fmt"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestZstdCodecSameBytes: a page compresses to the same bytes as with the
// library's default window, and reads back; a page above the window
// still reads back.
func TestZstdCodecSameBytes(t *testing.T) {
	var page []byte
	for i := 0; len(page) < 256<<10; i++ {
		page = fmt.Appendf(page, `{"id":"ord-%d","customer":"cust-%d","amount":%d.%02d}`, i, i%9973, i%5000, i%100)
	}
	c := &zstdCodec{}
	got, err := c.Encode(nil, page)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&zstd.Codec{}).Encode(nil, page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("a 256 KiB page compresses to %d bytes, %d with the default window", len(got), len(want))
	}
	big := bytes.Repeat(page, 12)
	for _, src := range [][]byte{page, big} {
		enc, err := c.Encode(make([]byte, 0, 64), src)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := kzstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dec.DecodeAll(enc, nil)
		dec.Close()
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("%d bytes read back as %d (%v)", len(src), len(back), err)
		}
		if back, err = c.Decode(nil, enc); err != nil || !bytes.Equal(back, src) {
			t.Fatalf("%d bytes read back through the codec as %d (%v)", len(src), len(back), err)
		}
	}
}
