package parquet_test

import (
	"path/filepath"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// TestDecodedValueColumns: under decode:, a value.<path> column reads the
// decoded value, also when the object is built from the staging (the
// record's bytes are the Confluent wire format), and the value column
// keeps the record's bytes.
func TestDecodedValueColumns(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", RunID: "r1", Fingerprint: "f1", MaxRowsPerFile: 2,
		Ranges:  []sinks.Range{{Partition: 0, Start: 0, End: 3}},
		Columns: plan.Columns{{Name: "id", Field: "value.id"}, {Name: "value", Field: "value"}}, Types: map[string]string{"id": "int64"}}
	var recs []record.Record
	for i, id := range []string{"7", "8", "9"} {
		r := sinktest.Rec(0, int64(i), "k", "")
		r.Value = []byte{0, 0, 0, 0, 42, 14, byte(i)} // Avro in the wire format
		r.Note = &record.Note{Decoded: &record.Decoded{Value: []byte(`{"id":` + id + `}`), ValueSchemaID: 42}}
		recs = append(recs, r)
	}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, recs[:2]...)
	sinktest.MustWrite(t, s, recs[2:]...)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, name := range objects(t, dir) {
		_, rows := readRows(t, filepath.Join(dir, name))
		for _, row := range rows {
			if row[0].IsNull() || string(row[1].ByteArray()) != string(recs[len(got)].Value) {
				t.Fatalf("row %d: %v", len(got), row)
			}
			got = append(got, row[0].Int64())
		}
	}
	if len(got) != 3 || got[0] != 7 || got[1] != 8 || got[2] != 9 {
		t.Fatalf("ids %v, want [7 8 9]", got)
	}
}
