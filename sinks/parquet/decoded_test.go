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

// TestTopicNamedRun: a topic named like a file of the staging directory
// ("run") stages and publishes beside it, and a resume finds its staging.
func TestTopicNamedRun(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "run", RunID: "r1", Fingerprint: "f1", MaxRowsPerFile: 10,
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 4}}, Columns: plan.Columns{{Name: "offset", Field: "offset"}}}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, sinktest.Rec(0, 0, "k", `{}`), sinktest.Rec(0, 1, "k", `{}`))
	if err := s.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, cfg) // a resume: the staged records are found again
	sinktest.MustWrite(t, s, sinktest.Rec(0, 2, "k", `{}`), sinktest.Rec(0, 3, "k", `{}`))
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := objects(t, dir)
	if len(names) != 1 || names[0] != "run/0/00000000000000000000-00000000000000000004.parquet" {
		t.Fatalf("objects %v", names)
	}
	if _, rows := readRows(t, filepath.Join(dir, names[0])); len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
}
