package parquet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// schemaCols stands in for the decoder's Columns: the columns of the
// schema id a framed value names. Ids 1 and 2 have the same columns (a
// schema registered twice, or changed in a doc only); id 3 dropped some.
var schemaCols = map[int32][]sinks.SchemaColumn{
	1: {{Name: "id", Type: "int64"}, {Name: "amount", Type: "decimal(10,2)"}, {Name: "at", Type: "timestamp_millis"},
		{Name: "blob", Type: "base64"}, {Name: "ratio", Type: "double"}, {Name: "day", Type: "date"}, {Name: "t", Type: "time_micros"},
		{Name: "big", Type: "uint64"}, {Name: "tags", Type: "string"}},
	3: {{Name: "id", Type: "int64"}, {Name: "note", Type: "string"}},
}

func init() { schemaCols[2] = schemaCols[1] }

func valueColumns(_ context.Context, value []byte) ([]sinks.SchemaColumn, error) {
	id := int32(binary.BigEndian.Uint32(value[1:5]))
	cols, ok := schemaCols[id]
	if !ok {
		return nil, fmt.Errorf("schema id %d unknown", id)
	}
	return cols, nil
}

// decodedRec is a record of partition 0 whose value (framed with schema
// id) the decode stage decoded to JSON; a tombstone when json is "".
func decodedRec(offset int64, id int32, json string) record.Record {
	r := sinktest.Rec(0, offset, "k", "")
	if json == "" {
		r.Value = nil
		return r
	}
	r.Value = binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	r.Value = append(r.Value, byte(offset)) // the payload, unread here
	r.Note = &record.Note{Decoded: &record.Decoded{Value: []byte(json), ValueSchemaID: id}}
	return r
}

// schemaWindow: ids 1 and 2 share their columns, id 3 differs, offset 2
// is a tombstone.
func schemaWindow() []record.Record {
	full := `{"id":%d,"amount":12.30,"at":"2026-12-07T10:00:00.123Z","blob":"AP8=","ratio":0.1,"day":"1969-12-31","t":"12:34:56.789012","big":18446744073709551615,"tags":["a","b"]}`
	return []record.Record{
		decodedRec(0, 1, fmt.Sprintf(full, 0)),
		decodedRec(1, 2, fmt.Sprintf(full, 1)),
		decodedRec(2, 0, ""),
		decodedRec(3, 3, `{"id":3,"note":"a"}`),
		decodedRec(4, 3, `{"id":4,"note":null}`),
		decodedRec(5, 1, fmt.Sprintf(full, 5)),
		decodedRec(6, 1, fmt.Sprintf(full, 6)),
	}
}

func schemaConfig(dir string) parquet.Config {
	return parquet.Config{Path: dir, Topic: "orders", RunID: "r1", Fingerprint: "f1", MaxRowsPerFile: 100,
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 7}}, ValueColumns: valueColumns, Provenance: true}
}

// TestSchemaColumns: without columns, an object's columns are those of
// its first decoded value's schema, typed from it, after the provenance
// columns; a value whose schema gives other columns starts a new object
// at its offset, one whose schema gives the same columns (another id)
// does not, and a tombstone stays in the object it falls in.
func TestSchemaColumns(t *testing.T) {
	dir := t.TempDir()
	s := open(t, schemaConfig(dir))
	recs := schemaWindow()
	sinktest.MustWrite(t, s, recs[:3]...)
	sinktest.MustWrite(t, s, recs[3:]...)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := objects(t, dir)
	want := []string{
		"orders/0/00000000000000000000-00000000000000000003.parquet",
		"orders/0/00000000000000000003-00000000000000000005.parquet",
		"orders/0/00000000000000000005-00000000000000000007.parquet",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("objects %v, want %v", names, want)
	}
	sch, rows := readRows(t, filepath.Join(dir, names[0]))
	text := sch.String()
	for _, typ := range []string{
		"optional int64 id (INT(64,true))", "optional int64 amount (DECIMAL(10,2))", "optional int64 at (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS))",
		"optional binary blob", "optional double ratio", "optional int32 day (DATE)", "optional int64 t (TIME(isAdjustedToUTC=false,unit=MICROS))",
		"optional int64 big (INT(64,false))", "optional binary tags (STRING)", "required int64 kafka_offset (INT(64,true))",
	} {
		if !strings.Contains(text, typ) {
			t.Errorf("schema lacks %q:\n%s", typ, text)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("first object: %d rows, want 3", len(rows))
	}
	r0 := rows[0]
	// kafka_topic, kafka_partition, kafka_offset, kafka_timestamp, then the schema's.
	if r0[2].Int64() != 0 || r0[4].Int64() != 0 || r0[5].Int64() != 1230 || r0[6].Int64() != 1796637600123 ||
		!bytes.Equal(r0[7].ByteArray(), []byte{0, 0xff}) || r0[8].Double() != 0.1 || r0[9].Int32() != -1 ||
		r0[10].Int64() != 45296789012 || uint64(r0[11].Int64()) != 18446744073709551615 || string(r0[12].ByteArray()) != `["a","b"]` {
		t.Errorf("row 0: %v", r0)
	}
	if tomb := rows[2]; tomb[2].Int64() != 2 || !tomb[4].IsNull() || !tomb[12].IsNull() {
		t.Errorf("the tombstone's row: %v, want its offset and NULL fields", tomb)
	}
	sch, rows = readRows(t, filepath.Join(dir, names[1]))
	if fields := sch.Fields(); len(fields) != 6 || fields[4].Name() != "id" || fields[5].Name() != "note" {
		t.Errorf("second object's schema:\n%s", sch)
	}
	if len(rows) != 2 || string(rows[0][5].ByteArray()) != "a" || !rows[1][5].IsNull() {
		t.Errorf("second object's rows: %v", rows)
	}
	if m := readManifest(t, dir); m.Rows != 7 || len(m.Objects) != 3 {
		t.Errorf("manifest: %d rows, %d objects", m.Rows, len(m.Objects))
	}
}

// TestSchemaColumnsResume: a run stopped with records staged (the first
// object published at the schema change, the next one staged) and
// resumed builds the same objects, byte for byte, as a run that went
// through at once: the staged object keeps the layout of its first
// decoded value.
func TestSchemaColumnsResume(t *testing.T) {
	recs := schemaWindow()
	once := t.TempDir()
	s := open(t, schemaConfig(once))
	sinktest.MustWrite(t, s, recs...)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(recs); cut++ {
		dir := t.TempDir()
		s := open(t, schemaConfig(dir))
		sinktest.MustWrite(t, s, recs[:cut]...)
		if err := s.Sync(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, schemaConfig(dir))
		sinktest.MustWrite(t, s, recs[cut-1:]...) // a re-delivery of the last one too
		if err := s.Finish(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, want := objects(t, dir), objects(t, once)
		if !slices.Equal(got, want) {
			t.Fatalf("cut %d: objects %v, want %v", cut, got, want)
		}
		for _, name := range want {
			a, _ := os.ReadFile(filepath.Join(dir, name))
			b, _ := os.ReadFile(filepath.Join(once, name))
			if !bytes.Equal(a, b) {
				t.Errorf("cut %d: %s differs from the run that went through at once", cut, name)
			}
		}
	}
}

// TestSchemaColumnsBadValue: a decoded value that its schema's column
// type cannot hold (here a fraction in an int64 field) is a bad record,
// and a provenance column's name among the schema's fields fails the run
// with how to fix it.
func TestSchemaColumnsBadValue(t *testing.T) {
	s := open(t, schemaConfig(t.TempDir()))
	err := s.Write(t.Context(), []record.Record{decodedRec(0, 3, `{"id":1.5,"note":"a"}`)})
	var re *record.Error
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column id") {
		t.Fatalf("a fraction in an int64 field: %v, want a bad record naming the column", err)
	}
	schemaCols[4] = []sinks.SchemaColumn{{Name: "kafka_offset", Type: "int64"}}
	defer delete(schemaCols, 4)
	err = s.Write(t.Context(), []record.Record{decodedRec(1, 4, `{"kafka_offset":1}`)})
	if err == nil || !strings.Contains(err.Error(), "provenance: false") {
		t.Fatalf("a field named like a provenance column: %v", err)
	}
}

// TestManyChunks: an object of many chunks of rows (the chunks recycled
// between the reader, the row makers and the writer) holds every record
// once, in offset order; run under the race detector in CI.
func TestManyChunks(t *testing.T) {
	dir := t.TempDir()
	const n = 5000
	s := open(t, parquet.Config{Path: dir, Topic: "orders", RunID: "r1", Fingerprint: "f1",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: n}}})
	batch := make([]record.Record, 0, 500)
	for i := range n {
		batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprint("k", i), fmt.Sprintf(`{"id":%d}`, i)))
		if len(batch) == cap(batch) {
			sinktest.MustWrite(t, s, batch...)
			batch = batch[:0]
		}
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := readDir(t, dir)
	if len(recs) != n {
		t.Fatalf("%d rows, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf(`{"id":%d}`, i) || string(r.Key) != fmt.Sprint("k", i) {
			t.Fatalf("row %d: offset %d key %q value %q", i, r.Offset, r.Key, r.Value)
		}
	}
}
