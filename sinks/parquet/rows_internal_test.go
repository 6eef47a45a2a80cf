package parquet

import (
	"bytes"
	"testing"

	"github.com/replay-tool/replay/internal/record"
)

// A chunk of staged records holds at most rowGroupBytes of values before
// its last record: large values are not gathered rowChunk at a time.
func TestChunksBoundedByBytes(t *testing.T) {
	var staged []byte
	for off := range int64(20) {
		r := record.Record{Topic: "t", Offset: off, Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, 300<<10)}
		staged = appendFrame(staged, &r)
	}
	todo, ordered := make(chan *chunk, 20), make(chan *chunk, 20)
	if err := (&Sink{topic: "t"}).readChunks(t.Context(), bytes.NewReader(staged), 0, nil, todo, ordered); err != nil {
		t.Fatal(err)
	}
	close(ordered)
	n := 0
	for c := range ordered {
		last := c.recs[len(c.recs)-1]
		if before := c.bytes - int64(len(last.Value)+len(last.Key)+64); before >= rowGroupBytes {
			t.Fatalf("a chunk of %d records holds %d bytes of values before its last", len(c.recs), before)
		}
		n += len(c.recs)
	}
	if n != 20 {
		t.Fatalf("%d records in the chunks, want 20", n)
	}
}
