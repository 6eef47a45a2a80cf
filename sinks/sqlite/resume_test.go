package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// A resumed run refuses a database file or a table that did not exist
// when the sink opened (a relative path from another working directory, a
// deleted database or table): the rows before the checkpoints are not there.
func TestSQLiteCheckResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.db")
	open := func(create bool) *sqlite.Sink {
		t.Helper()
		s, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "orders", CreateTable: create})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	first := open(true)
	if err := first.CheckResume(points(10, 10)); err != nil {
		t.Fatalf("nothing committed past the starts: %v", err)
	}
	wantResumeError(t, first.CheckResume(points(10, 13)), "partition 1", "offset 13", "the database "+path+" did not exist")
	first.Close()
	// Refusing, the sink dropped the table it created: a retry of the same
	// run is refused again, not handed an empty table.
	var tables int
	if err := openSQLite(t, path).QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'orders'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the table the refused run created is still there (%d, %v)", tables, err)
	}
	wantResumeError(t, open(true).CheckResume(points(10, 13)), "the table orders did not exist in the database "+path)

	fresh := open(true)
	if err := fresh.CheckResume(points(10, 10)); err != nil {
		t.Fatal(err)
	}
	fresh.Close()
	if err := open(true).CheckResume(points(15, 13)); err != nil {
		t.Fatalf("the database of the first run: %v", err)
	}
	db := openSQLite(t, path)
	if _, err := db.Exec(`DROP TABLE orders`); err != nil {
		t.Fatal(err)
	}
	wantResumeError(t, open(true).CheckResume(points(15, 10)), "partition 0", "the table orders did not exist in the database "+path)
	// The table it created is dropped again, so a retry is refused too.
	wantResumeError(t, open(true).CheckResume(points(15, 10)), "partition 0", "the table orders did not exist in the database "+path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database file, which was there, is gone: %v", err)
	}

	// The dead-letter wrapper asks the database too.
	dead := filepath.Join(t.TempDir(), "dead.db")
	s, err := registry.NewDeadLetter(t.Context(), plan.Sink{Type: "sqlite", Config: &sqlite.Section{Path: dead, Common: dbsection.Common{Table: "dead", CreateTable: true}}}, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Capabilities().Resumer
	if r == nil {
		t.Fatal("the sqlite dead-letter sink is not a Resumer")
	}
	wantResumeError(t, r.CheckResume(points(12, 10)), "the database "+dead+" did not exist")
	if _, err := os.Stat(dead); err != nil {
		t.Fatal(err)
	}
}

// The table a refused run drops is checked empty in the same write
// transaction: a row another process is inserting meanwhile is waited for
// and keeps the table, instead of being dropped with it.
func TestSQLiteRefusedResumeKeepsARowInsertedMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.db")
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: path, Table: "orders", CreateTable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := openSQLite(t, path)
	other, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(t.Context(), `INSERT INTO orders (key, topic, partition, "offset", "timestamp", headers) VALUES ('other', 'orders', 0, 3, '2026-11-03T10:00:00.000Z', '[]')`); err != nil {
		t.Fatal(err)
	}
	refused := make(chan error, 1)
	go func() { refused <- s.CheckResume(points(10, 13)) }()
	testenv.Eventually(t, 30*time.Second, time.Millisecond, func() bool {
		return testenv.Goroutines("sqlite.(*Sink).CheckResume(", "sqlite.busyHandler(") == 1
	}, "CheckResume waiting for the lock")
	if _, err := other.ExecContext(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	wantResumeError(t, <-refused, "partition 1")
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM orders WHERE key = 'other'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the row inserted while the refused run checked its table: %d (%v), want it kept", n, err)
	}
}
