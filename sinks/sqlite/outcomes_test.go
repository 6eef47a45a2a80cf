package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

func mustKeyer(t *testing.T, text string) *sinks.Keyer {
	t.Helper()
	k, err := sinks.NewKeyer(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// dump is every row of table as text, ordered by the first column.
func dump(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT * FROM `+table+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		b.WriteString(strings.ReplaceAll(sprintAll(vals), "\n", " ") + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func sprintAll(vals []any) string {
	var parts []string
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			parts = append(parts, "NULL")
		case string:
			parts = append(parts, "'"+v+"'")
		default:
			parts = append(parts, fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " | ")
}

func wantOutcomes(t *testing.T, s sinks.OutcomeCounter, want sinks.Outcomes) {
	t.Helper()
	if got := s.Outcomes(); got != want {
		t.Errorf("outcomes = %+v,\nwant       %+v", got, want)
	}
}

// What SQLite reports is what the outcomes say: inserted, unchanged on a
// re-run, updated for a changed record, ignored under on_conflict: ignore;
// a transaction that is rolled back counts nothing.
func TestSQLiteOutcomes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	batch := []record.Record{sinktest.Rec(0, 1, "a", `{"v":1}`), sinktest.Rec(0, 2, "b", `{"v":2}`), sinktest.Rec(0, 3, "c", `{"v":3}`)}
	sinktest.MustWrite(t, s, batch...)
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 3})
	sinktest.MustWrite(t, s, batch...)
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 3, Unchanged: 3})
	changed := batch[1]
	changed.Value = []byte(`{"v":20}`)
	sinktest.MustWrite(t, s, changed)
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 3, Unchanged: 3, Updated: 1})

	// A batch rolled back (a key template failing after the first rows,
	// a row the column refuses) counts nothing.
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse BEFORE INSERT ON t WHEN NEW."offset" = 9 BEGIN SELECT RAISE(ABORT, 'offset 9 refused'); END`); err != nil {
		t.Fatal(err)
	}
	err := s.Write(t.Context(), []record.Record{sinktest.Rec(0, 8, "", `{}`), sinktest.Rec(0, 9, "", `{}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 9 {
		t.Fatalf("Write = %v, want the *record.Error of offset 9", err)
	}
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 3, Unchanged: 3, Updated: 1})

	ig := newSQLite(t, sqlite.Config{Path: path, Table: "t", OnConflict: "ignore"})
	sinktest.MustWrite(t, ig, changed, sinktest.Rec(0, 4, "", `{}`))
	wantOutcomes(t, ig, sinks.Outcomes{Inserted: 1, Ignored: 1})
}

// A key template that collides across partitions is counted, the first
// pair named; records of one partition updating their key are not
// collisions.
func TestSQLiteKeyCollisions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newKeyedSQLite(t, mustKeyer(t, "{{ .Offset }}"), sqlite.Config{Path: path, Table: "t", CreateTable: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 12, "", `{"p":0}`), sinktest.Rec(0, 13, "", `{"p":0}`))
	sinktest.MustWrite(t, s, sinktest.Rec(1, 12, "", `{"p":1}`), sinktest.Rec(1, 13, "", `{"p":1}`))
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 2, Updated: 2, Collisions: 2, FirstCollision: "orders/0/12 and orders/1/12: key 12"})

	k := newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: filepath.Join(t.TempDir(), "k.db"), Table: "t", CreateTable: true})
	sinktest.MustWrite(t, k, sinktest.Rec(0, 1, "a", `{"v":1}`), sinktest.Rec(0, 2, "a", `{"v":2}`))
	wantOutcomes(t, k, sinks.Outcomes{Inserted: 1, Updated: 1})
}

// on_tombstone: delete removes the key's row in order with the batch's
// upserts; a re-run leaves the same table; skip writes nothing.
func TestSQLiteOnTombstone(t *testing.T) {
	keyer := mustKeyer(t, "{{ .Key }}")
	window := []record.Record{
		sinktest.Rec(0, 1, "a", `{"v":1}`),
		sinktest.Rec(0, 2, "b", `{"v":1}`),
		sinktest.Rec(0, 3, "a", ""), // deletes a
		sinktest.Rec(0, 4, "c", ""), // nothing to delete
		sinktest.Rec(0, 5, "d", ""), // deleted, then written again
		sinktest.Rec(0, 6, "d", `{"v":2}`),
		sinktest.Rec(0, 7, "b", `{"v":3}`),
	}
	t.Run("delete", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "t.db")
		s := newKeyedSQLite(t, keyer, sqlite.Config{Path: path, Table: "t", CreateTable: true, OnTombstone: dbsection.OnTombstoneDelete})
		sinktest.MustWrite(t, s, window...)
		rows := readSQLite(t, path, "t")
		if len(rows) != 2 || rows["b"].Offset != 7 || rows["d"].Offset != 6 {
			t.Fatalf("rows = %+v, want b@7 and d@6", rows)
		}
		wantOutcomes(t, s, sinks.Outcomes{Inserted: 3, Updated: 1, Deleted: 1, Absent: 2})
		before := dump(t, openSQLite(t, path), "t")
		// The re-run, in other batches: the same table.
		for _, b := range [][]record.Record{window[:3], window[3:5], window[5:]} {
			sinktest.MustWrite(t, s, b...)
		}
		if after := dump(t, openSQLite(t, path), "t"); after != before {
			t.Errorf("the re-run changed the table:\n%s\nwant\n%s", after, before)
		}
	})
	t.Run("skip", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "t.db")
		s := newKeyedSQLite(t, keyer, sqlite.Config{Path: path, Table: "t", CreateTable: true, OnTombstone: dbsection.OnTombstoneSkip})
		sinktest.MustWrite(t, s, window...)
		rows := readSQLite(t, path, "t")
		if len(rows) != 3 || rows["a"].Offset != 1 || rows["b"].Offset != 7 || rows["d"].Offset != 6 {
			t.Fatalf("rows = %+v, want a@1, b@7 and d@6", rows)
		}
		wantOutcomes(t, s, sinks.Outcomes{Inserted: 3, Updated: 1, Ignored: 3})
	})
	t.Run("write", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "t.db")
		s := newKeyedSQLite(t, keyer, sqlite.Config{Path: path, Table: "t", CreateTable: true})
		sinktest.MustWrite(t, s, window...)
		rows := readSQLite(t, path, "t")
		if len(rows) != 4 || rows["a"].Value != nil || rows["c"].Value != nil || rows["c"].Offset != 4 {
			t.Fatalf("rows = %+v, want a and c with NULL values", rows)
		}
	})
}

// A table already holding newer versions of some keys: a replay with a
// version leaves them, inserts the missing keys, counts stale and
// duplicate updates; the re-run changes nothing.
func TestSQLiteVersionGuard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	keyer := mustKeyer(t, "{{ .Key }}")
	cfg := sqlite.Config{Path: path, Table: "t", CreateTable: true, Version: "value.v", OnTombstone: dbsection.OnTombstoneDelete}
	live := newKeyedSQLite(t, keyer, cfg)
	// The live pipeline's rows: a and b are newer than the replay's, c
	// has the replay's version, e is older and its replay is a tombstone.
	sinktest.MustWrite(t, live, sinktest.Rec(0, 100, "a", `{"v":9,"s":"live"}`), sinktest.Rec(0, 101, "b", `{"v":"2026-12-01","s":"live"}`),
		sinktest.Rec(0, 102, "c", `{"v":5,"s":"same"}`), sinktest.Rec(0, 103, "e", `{"v":1,"s":"live"}`))
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `UPDATE t SET "offset" = "offset" - 100`); err != nil { // the replay re-reads these offsets
		t.Fatal(err)
	}
	before := dump(t, db, "t")

	s := newKeyedSQLite(t, keyer, cfg)
	replayed := []record.Record{
		sinktest.Rec(0, 1, "a", `{"v":7,"s":"old"}`),            // stale: 7 < 9
		sinktest.Rec(0, 2, "b", `{"v":"2026-11-03","s":"old"}`), // stale: text order
		sinktest.Rec(0, 3, "c", `{"v":5,"s":"same"}`),           // duplicate
		sinktest.Rec(0, 4, "d", `{"v":1,"s":"new"}`),            // inserted
		sinktest.Rec(0, 5, "d", `{"v":2,"s":"newer"}`),          // updated
		sinktest.Rec(0, 6, "a", ""),                             // a tombstone without a version deletes
	}
	replayed[5].Headers = nil
	sinktest.MustWrite(t, s, replayed[:5]...)
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 1, Updated: 1, Stale: 2, Duplicate: 1})
	rows := readSQLite(t, path, "t")
	for key, want := range map[string]string{"a": `{"v":9,"s":"live"}`, "b": `{"v":"2026-12-01","s":"live"}`, "c": `{"v":5,"s":"same"}`, "d": `{"v":2,"s":"newer"}`} {
		if r, ok := rows[key]; !ok || r.Value == nil || *r.Value != want {
			t.Errorf("row %s = %+v, want value %s", key, r, want)
		}
	}
	if !strings.Contains(dump(t, db, "t"), "'d' | 'orders' | 0 | 5") {
		t.Errorf("row d is not the record at offset 5:\n%s", dump(t, db, "t"))
	}
	var v any
	if err := db.QueryRowContext(t.Context(), `SELECT replay_version FROM t WHERE key = 'd'`).Scan(&v); err != nil || v != int64(2) {
		t.Errorf("replay_version of d = %#v (%v), want the integer 2", v, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
		if !strings.HasPrefix(line, "'e'") && !strings.Contains(dump(t, db, "t"), line) {
			t.Errorf("live row changed: %s", line)
		}
	}
	// The re-run changes nothing.
	after := dump(t, db, "t")
	s2 := newKeyedSQLite(t, keyer, cfg)
	sinktest.MustWrite(t, s2, replayed[:5]...)
	wantOutcomes(t, s2, sinks.Outcomes{Stale: 3, Duplicate: 2})
	if again := dump(t, db, "t"); again != after {
		t.Errorf("the re-run changed the table:\n%s\nwant\n%s", again, after)
	}

	// A tombstone deletes unless the row's version is greater than its
	// own; one without a version deletes.
	tomb := sinktest.Rec(0, 3, "e", "")
	sinktest.MustWrite(t, s2, tomb, replayed[5])
	if rows := readSQLite(t, path, "t"); len(rows) != 3 {
		t.Errorf("rows after the tombstones of a and e = %+v, want b, c and d", rows)
	}

	// A version a REAL would round cannot be ordered: a bad record (its
	// successor would compare equal, a duplicate).
	for _, v := range []string{`1000000000000000000.0000000002`, `1e400`} {
		err := s2.Write(t.Context(), []record.Record{sinktest.Rec(0, 8, "g", `{"v":`+v+`}`)})
		if re := (*record.Error)(nil); !errors.As(err, &re) || re.Offset != 8 || !strings.Contains(err.Error(), "more digits than the REAL") {
			t.Errorf("Write of version %s = %v, want its *record.Error", v, err)
		}
	}
	sinktest.MustWrite(t, s2, sinktest.Rec(0, 8, "g", `{"v":12.30}`), sinktest.Rec(0, 9, "g", `{"v":1e-7}`))

	// A record without the version cannot be ordered: a bad record.
	err := s2.Write(t.Context(), []record.Record{sinktest.Rec(0, 9, "f", `{"s":"no version"}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 9 || !errors.Is(err, sqlite.ErrNoVersion) {
		t.Errorf("Write of a record without a version = %v, want its *record.Error wrapping ErrNoVersion", err)
	}
}

// Large batches go through multi-row inserts; a key already stored, a
// key twice in the batch or a refused row fall back to row-by-row writes
// with the same results and counts.
func TestSQLiteLargeBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: path, Table: "t", CreateTable: true})
	var batch []record.Record
	for i := range 300 {
		batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprintf("k%d", i%290), fmt.Sprintf(`{"n":%d}`, i))) // k0..k9 twice
	}
	sinktest.MustWrite(t, s, batch...)
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 290, Updated: 10})
	rows := readSQLite(t, path, "t")
	if len(rows) != 290 || rows["k5"].Offset != 295 || rows["k200"].Offset != 200 {
		t.Fatalf("%d rows, k5@%d, k200@%d; want 290, k5@295, k200@200", len(rows), rows["k5"].Offset, rows["k200"].Offset)
	}
	batch[150].Value = []byte(`{"changed":true}`)
	sinktest.MustWrite(t, s, append(batch, sinktest.Rec(0, 300, "new", `{}`))...)
	// k0..k9 are rewritten twice each (to the first record, back to the second).
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 291, Updated: 31, Unchanged: 279})

	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse BEFORE INSERT ON t WHEN NEW."offset" = 1100 BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	var fresh []record.Record
	for i := 1000; i < 1200; i++ {
		fresh = append(fresh, sinktest.Rec(0, int64(i), fmt.Sprintf("f%d", i), `{}`))
	}
	err := s.Write(t.Context(), fresh)
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 1100 {
		t.Fatalf("Write = %v, want the *record.Error of offset 1100", err)
	}
	if n := len(readSQLite(t, path, "t")); n != 291 {
		t.Errorf("%d rows after the refused batch, want 291", n)
	}
	// k0..k9 are rewritten twice each (to the first record, back to the second).
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 291, Updated: 31, Unchanged: 279})
}

// A row a trigger of the table skips (RAISE(IGNORE)) is counted ignored,
// fresh and on a re-run, in chunks and row by row, and the run goes on.
func TestSQLiteTriggerSkippedRowsCounted(t *testing.T) {
	for _, n := range []int{10, 200} { // below and above a chunk of rows
		t.Run(fmt.Sprint(n, " rows"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			probe := newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true})
			probe.Close()
			db := openSQLite(t, path)
			if _, err := db.Exec(`CREATE TRIGGER skip_k5 BEFORE INSERT ON orders WHEN new.key = 'k5' BEGIN SELECT RAISE(IGNORE); END`); err != nil {
				t.Fatal(err)
			}
			var batch []record.Record
			for i := range n {
				batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d}`, i)))
			}
			s := newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: path, Table: "orders"})
			sinktest.MustWrite(t, s, batch...)
			wantOutcomes(t, s, sinks.Outcomes{Inserted: int64(n - 1), Ignored: 1})
			sinktest.MustWrite(t, s, batch...)
			wantOutcomes(t, s, sinks.Outcomes{Inserted: int64(n - 1), Unchanged: int64(n - 1), Ignored: 2})
			var rows int
			if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&rows); err != nil || rows != n-1 {
				t.Errorf("%d rows (%v), want %d", rows, err, n-1)
			}
		})
	}
}
