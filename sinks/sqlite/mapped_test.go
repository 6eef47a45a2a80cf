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
