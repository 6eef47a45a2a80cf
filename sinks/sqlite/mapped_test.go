package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// Under a mapping (Config.Mapped) the default layout's value column holds
// the mapped value and value_bytes the bytes as read, in a chunk of many
// rows (the shared statement) as in one of a single row.
func TestSQLiteMappedValue(t *testing.T) {
	for _, n := range []int{1, 130} { // 130: two chunks of chunkRows (64) and one row
		path := filepath.Join(t.TempDir(), "m.db")
		s, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "orders", CreateTable: true, Mapped: true})
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]record.Record, n)
		for i := range batch {
			orig := []byte(`{"id":1, "debug":true}`)
			batch[i] = record.Record{Topic: "orders", Offset: int64(i), Value: []byte(`{"id":1}`), Note: &record.Note{Original: orig}}
		}
		if err := s.Write(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		var value string
		var raw []byte
		if err := db.QueryRow(`SELECT value, value_bytes FROM orders WHERE "offset" = 0`).Scan(&value, &raw); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if value != `{"id":1}` || string(raw) != `{"id":1, "debug":true}` {
			t.Errorf("%d rows: value %s, value_bytes %s; want the mapped value and the bytes as read", n, value, raw)
		}
	}
}

// A value both decoded and mapped: value holds the mapped JSON (not the
// decoded value before the mapping), value_schema_id the schema id, and
// value_bytes the framed bytes as read.
func TestSQLiteDecodedAndMappedValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dm.db")
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "orders", CreateTable: true, Mapped: true, DecodedValue: true})
	if err != nil {
		t.Fatal(err)
	}
	framed := []byte{0, 0, 0, 0, 7, 2, 'x'}
	r := record.Record{Topic: "orders", Value: []byte(`{"id":1,"eur":2}`),
		Note: &record.Note{Original: framed, Decoded: &record.Decoded{Value: []byte(`{"id":1}`), ValueSchemaID: 7}}}
	if err := s.Write(t.Context(), []record.Record{r}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var value string
	var id int
	var raw []byte
	if err := db.QueryRow(`SELECT value, value_schema_id, value_bytes FROM orders`).Scan(&value, &id, &raw); err != nil {
		t.Fatal(err)
	}
	if value != `{"id":1,"eur":2}` || id != 7 || string(raw) != string(framed) {
		t.Errorf("value %s, value_schema_id %d, value_bytes %x; want the mapped value, 7 and the framed bytes", value, id, raw)
	}
}
