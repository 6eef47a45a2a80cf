package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

var affinityColumns = plan.Columns{
	{Name: "id", Field: "key"}, {Name: "qty", Field: "value.qty"}, {Name: "price", Field: "value.price"},
	{Name: "n", Field: "value.n"}, {Name: "note", Field: "value.note"}, {Name: "raw", Field: "value"}, {Name: "k", Field: "kafka_key"},
}

// A value the column's affinity would change is a bad record naming the
// column, and nothing of its batch is written; values that read back the
// same are stored, as numbers where the column asks for them.
func TestSQLiteAffinityChangesAreBadRecords(t *testing.T) {
	for _, strict := range []bool{false, true} {
		name := "plain"
		ddl := `CREATE TABLE t (id TEXT PRIMARY KEY, qty INTEGER, price REAL, n NUMERIC, note TEXT, raw BLOB, k BLOB)`
		if strict {
			name = "strict"
			ddl = `CREATE TABLE t (id TEXT PRIMARY KEY, qty INTEGER, price REAL, n ANY, note TEXT, raw BLOB, k BLOB) STRICT`
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			db := openSQLite(t, path)
			if _, err := db.ExecContext(t.Context(), ddl); err != nil {
				t.Fatal(err)
			}
			s := newSQLite(t, sqlite.Config{Path: path, Table: "t", Columns: affinityColumns})
			bad := []struct{ value, column, reason string }{
				{`{"qty":"007"}`, "qty", `would store "007" as the integer 7`},
				{`{"qty":1e3}`, "qty", `would store "1e3" as the integer 1000`},
				{`{"qty":" 5"}`, "qty", `" 5" as the integer 5`},
				{`{"qty":18446744073709551617}`, "qty", "as a REAL that reads back as 1.84467440737096e+19"},
				{`{"price":9007199254740993}`, "price", "a REAL column would round 9007199254740993"},
				{`{"price":1.50}`, "price", `"1.50" as a REAL that reads back as 1.5;`},
				{`{"price":5e-324}`, "price", `"5e-324" as a REAL that reads back as 4.94065645841247e-324;`},
			}
			if !strict { // ANY in a STRICT table converts nothing
				bad = append(bad, struct{ value, column, reason string }{`{"n":"12.0"}`, "n", `NUMERIC column would store "12.0" as the integer 12`})
			}
			for i, b := range bad {
				r := sinktest.Rec(0, int64(i), "", b.value)
				err := s.Write(t.Context(), []record.Record{sinktest.Rec(0, 100, "", `{"qty":1}`), r})
				var re *record.Error
				if !errors.As(err, &re) || re.Offset != int64(i) || !errors.Is(err, sqlite.ErrChanged) {
					t.Errorf("%s: Write = %v, want the *record.Error of offset %d wrapping ErrChanged", b.value, err, i)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, "column "+b.column+":") || !strings.Contains(msg, b.reason) {
					t.Errorf("%s: error %q does not name column %s and %q", b.value, msg, b.column, b.reason)
				}
			}
			if n := len(dump(t, db, "t")); n != 0 {
				t.Fatalf("rows written beside bad records:\n%s", dump(t, db, "t"))
			}
			good := sinktest.Rec(0, 50, "k\x00\xff", `{"qty":9007199254740993,"price":12.5,"n":"abc","note":"007"}`)
			good2 := sinktest.Rec(0, 51, "", `{"qty":"-42","price":3,"n":"1e3x","note":1e3}`)
			sinktest.MustWrite(t, s, good, good2)
			want := "'orders/0/50' | 9007199254740993 | 12.5 | 'abc' | '007' | '" + string(good.Value) + "' | 'k\x00\xff'\n" +
				"'orders/0/51' | -42 | 3 | '1e3x' | '1e3' | '" + string(good2.Value) + "' | NULL\n"
			if got := dump(t, db, "t"); got != want {
				t.Errorf("rows:\n%s\nwant\n%s", got, want)
			}
			var types string
			if err := db.QueryRowContext(t.Context(), `SELECT group_concat(typeof(qty) || ',' || typeof(price) || ',' || typeof(raw), ';') FROM t`).Scan(&types); err != nil || types != "integer,real,blob;integer,real,blob" {
				t.Errorf("types %q (%v)", types, err)
			}
		})
	}
}

// A STRICT table's refusal of a value's type is a bad record too.
func TestSQLiteStrictRefusalIsBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	if _, err := openSQLite(t, path).ExecContext(t.Context(), `CREATE TABLE t (id TEXT PRIMARY KEY, qty INTEGER) STRICT`); err != nil {
		t.Fatal(err)
	}
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", Columns: plan.Columns{{Name: "id", Field: "key"}, {Name: "qty", Field: "value.qty"}}})
	err := s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", `{"qty":1}`), sinktest.Rec(0, 2, "", `{"qty":"many"}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 2 || !strings.Contains(err.Error(), "cannot store TEXT value in INTEGER column") {
		t.Fatalf("Write = %v, want the *record.Error of offset 2 with SQLite's reason", err)
	}
}
