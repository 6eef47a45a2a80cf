package sqlite_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// framed is a record whose value (and key) are in the Confluent wire format
// with the decoded JSON the decode stage gives them.
func framed(offset int64, value, key string, valueID, keyID int32) record.Record {
	r := sinktest.Rec(0, offset, "", "")
	r.Value = append([]byte{0, 0, 0, 0, byte(valueID)}, fmt.Sprintf("payload %d", offset)...)
	d := &record.Decoded{Value: []byte(value), ValueSchemaID: valueID}
	if key != "" {
		r.Key = append([]byte{0, 0, 0, 0, byte(keyID)}, "k"...)
		d.Key, d.KeySchemaID = []byte(key), keyID
	}
	r.Note = &record.Note{Decoded: d}
	return r
}

// With decode:, the default layout stores the decoded value in value (in
// multi-row inserts too, which otherwise cast value from value_bytes), its
// schema id in value_schema_id, the decoded key in kafka_key_json with
// key_schema_id, and the bytes in value_bytes and kafka_key.
func TestSQLiteDecodedDefaultLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true, DecodedValue: true, DecodedKey: true})
	var batch []record.Record
	for i := range 300 {
		batch = append(batch, framed(int64(i), fmt.Sprintf(`{"id":%d,"amount":12.30}`, 9223372036854775000+i), `{"id":1}`, 7, 3))
	}
	sinktest.MustWrite(t, s, batch...)
	db := openSQLite(t, path)
	var n int
	q := `SELECT count(*) FROM orders WHERE value = '{"id":' || (9223372036854775000 + "offset") || ',"amount":12.30}' AND value_schema_id = 7
		AND typeof(value_bytes) = 'blob' AND hex(value_bytes) = '0000000007' || hex('payload ' || "offset") AND kafka_key_json = '{"id":1}' AND key_schema_id = 3 AND kafka_key = X'00000000036B'`
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil || n != 300 {
		t.Errorf("%d of 300 rows hold the decoded value, key and schema ids with the bytes (%v)", n, err)
	}
	before := s.Outcomes()
	sinktest.MustWrite(t, s, batch[0])
	if got := s.Outcomes().Unchanged - before.Unchanged; got != 1 {
		t.Errorf("a re-run: %d unchanged, want 1", got)
	}
}

// A table first written without decode: is refused by a plan that decodes,
// naming the ALTER TABLE that adds the columns; once added, a re-run
// rewrites the row with the decoded value.
func TestSQLiteDecodedStaleTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	r := framed(0, `{"id":1}`, "", 5, 0)
	plain := r
	plain.Note = nil
	s := newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true})
	sinktest.MustWrite(t, s, plain)
	s.Close()
	_, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "orders", CreateTable: true, DecodedValue: true})
	alter := `ALTER TABLE orders ADD COLUMN "value_schema_id" INTEGER;`
	if err == nil || !strings.Contains(err.Error(), alter) {
		t.Fatalf("error %v, want one naming %s", err, alter)
	}
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), alter); err != nil {
		t.Fatal(err)
	}
	s = newSQLite(t, sqlite.Config{Path: path, Table: "orders", DecodedValue: true})
	sinktest.MustWrite(t, s, r)
	if got := s.Outcomes().Updated; got != 1 {
		t.Errorf("a re-run that decodes updated %d rows, want 1", got)
	}
	var value string
	var id int
	if err := db.QueryRowContext(t.Context(), `SELECT value, value_schema_id FROM orders`).Scan(&value, &id); err != nil || value != `{"id":1}` || id != 5 {
		t.Errorf("the row holds %s, schema id %d (%v); want the decoded value and 5", value, id, err)
	}
}

// Mapped columns read the decoded value; a BLOB column mapped to value
// keeps the record's bytes.
func TestSQLiteDecodedColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE t (k TEXT PRIMARY KEY, id INTEGER, amount TEXT, doc TEXT, raw BLOB)`); err != nil {
		t.Fatal(err)
	}
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", DecodedValue: true, Columns: plan.Columns{
		{Name: "k", Field: "key"}, {Name: "id", Field: "value.id"}, {Name: "amount", Field: "value.amount"}, {Name: "doc", Field: "value"}, {Name: "raw", Field: "value"}}})
	r := framed(0, `{"id":9223372036854775807,"amount":12.30}`, "", 7, 0)
	sinktest.MustWrite(t, s, r)
	var id int64
	var amount, doc string
	var raw []byte
	if err := db.QueryRowContext(t.Context(), `SELECT id, amount, doc, raw FROM t`).Scan(&id, &amount, &doc, &raw); err != nil {
		t.Fatal(err)
	}
	if id != 9223372036854775807 || amount != "12.30" || doc != `{"id":9223372036854775807,"amount":12.30}` || string(raw) != string(r.Value) {
		t.Errorf("the row holds id %d, amount %s, doc %s, raw %q", id, amount, doc, raw)
	}
}
