package sqlite_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// orders is a batch of n records of partition 0 from offset 100, keys
// k0000.., values {"customer":"c<i % customers>"}.
func orders(n, customers int) []record.Record {
	batch := make([]record.Record, n)
	for i := range batch {
		batch[i] = sinktest.Rec(0, int64(100+i), fmt.Sprintf("k%04d", i), fmt.Sprintf(`{"customer":"c%d"}`, i%customers))
	}
	return batch
}

// A trigger that raises for one row of a large batch (RAISE(ABORT), and
// RAISE(ROLLBACK), which ends the transaction) makes that row a bad record:
// under on_error: skip the others are written and it alone is skipped,
// with the trigger's message; under on_error: fail the Write names it and
// writes nothing, and the records before it are written.
func TestSQLiteTriggerRejectsOneRow(t *testing.T) {
	for _, raise := range []string{"ABORT", "ROLLBACK"} {
		t.Run(raise, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			s := newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: path, Table: "t", CreateTable: true})
			if _, err := openSQLite(t, path).ExecContext(t.Context(), `CREATE TRIGGER block BEFORE INSERT ON t WHEN NEW.key = 'k0137' BEGIN SELECT RAISE(`+raise+`, 'order k0137 is blocked by policy'); END`); err != nil {
				t.Fatal(err)
			}
			batch := orders(400, 400)
			err := s.Write(t.Context(), batch)
			var re *record.Error
			if !errors.As(err, &re) || re.Offset != 237 || !strings.Contains(err.Error(), "order k0137 is blocked by policy") {
				t.Fatalf("Write = %v, want the *record.Error of orders/0@237 with the trigger's message", err)
			}
			if n := len(readSQLite(t, path, "t")); n != 0 {
				t.Fatalf("%d rows after the failed Write, want none", n)
			}
			sinktest.MustWrite(t, s, batch[:137]...) // on_error: fail writes the records before it
			if n := len(readSQLite(t, path, "t")); n != 137 {
				t.Fatalf("%d rows after writing the records before the bad one, want 137", n)
			}
			skipped := sinktest.WriteSkipping(t, s, batch...)
			if len(skipped) != 1 || skipped[0].Offset != 237 || !strings.Contains(skipped[0].Error(), "order k0137 is blocked by policy") {
				t.Fatalf("skipped %v, want orders/0@237 with the trigger's message", skipped)
			}
			if n := len(readSQLite(t, path, "t")); n != 399 {
				t.Errorf("%d rows, want 399", n)
			}
			wantOutcomes(t, s, sinks.Outcomes{Inserted: 399, Unchanged: 137})
		})
	}
}

// Two rows of a batch whose trigger ends the transaction (RAISE(ROLLBACK))
// leave nothing of the failed Write in the table: the rows after the
// second one do not run in autocommit. Skipping both writes the others.
func TestSQLiteTwoRollbackRowsWriteNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: path, Table: "t", CreateTable: true})
	if _, err := openSQLite(t, path).ExecContext(t.Context(), `CREATE TRIGGER block BEFORE INSERT ON t WHEN NEW.key IN ('k0037', 'k0142') BEGIN SELECT RAISE(ROLLBACK, 'blocked by policy'); END`); err != nil {
		t.Fatal(err)
	}
	batch := orders(300, 300)
	var re *record.Error
	if err := s.Write(t.Context(), batch); !errors.As(err, &re) || re.Offset != 137 {
		t.Fatalf("Write = %v, want the *record.Error of orders/0@137", err)
	}
	if n := len(readSQLite(t, path, "t")); n != 0 {
		t.Fatalf("%d rows after the failed Write, want none", n)
	}
	skipped := sinktest.WriteSkipping(t, s, batch...)
	if len(skipped) != 2 || skipped[0].Offset != 137 || skipped[1].Offset != 242 {
		t.Fatalf("skipped %v, want orders/0@137 and @242", skipped)
	}
	if n := len(readSQLite(t, path, "t")); n != 298 {
		t.Errorf("%d rows, want 298", n)
	}
}

// A unique index on another column rejects the rows beyond the first of
// each value, within a batch and against the rows stored, as bad records
// that name the constraint; re-running the window skips the same records
// and leaves the table as it was.
func TestSQLiteUniqueIndexRejectsDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	newSink := func() keyedSQLite {
		return newKeyedSQLite(t, mustKeyer(t, "{{ .Key }}"), sqlite.Config{Path: path, Table: "t", CreateTable: true})
	}
	s := newSink()
	if _, err := openSQLite(t, path).ExecContext(t.Context(), `CREATE UNIQUE INDEX t_customer ON t (value->>'customer')`); err != nil {
		t.Fatal(err)
	}
	all := orders(300, 250)
	window := [][]record.Record{all[:200], all[200:]}
	var want []int64
	for i := 250; i < 300; i++ {
		want = append(want, int64(100+i))
	}
	run := func(s keyedSQLite) (skipped []int64, rows map[string]sqliteRow) {
		for _, b := range window {
			for _, e := range sinktest.WriteSkipping(t, s, b...) {
				if !strings.Contains(e.Error(), "UNIQUE constraint failed") {
					t.Errorf("skipped %v: the reason does not name the constraint", e)
				}
				skipped = append(skipped, e.Offset)
			}
		}
		return skipped, readSQLite(t, path, "t")
	}
	skipped, rows := run(s)
	if fmt.Sprint(skipped) != fmt.Sprint(want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if len(rows) != 250 {
		t.Errorf("%d rows, want 250", len(rows))
	}
	wantOutcomes(t, s, sinks.Outcomes{Inserted: 250})
	again := newSink()
	skipped2, rows2 := run(again)
	if fmt.Sprint(skipped2) != fmt.Sprint(want) {
		t.Errorf("re-run skipped %v, want %v", skipped2, want)
	}
	if !reflect.DeepEqual(rows2, rows) {
		t.Errorf("the re-run changed the table")
	}
	wantOutcomes(t, again, sinks.Outcomes{Unchanged: 250})
}
