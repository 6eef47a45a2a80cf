package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
)

func openInternal(t *testing.T, cfg Config) *Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 20 * time.Second
	}
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func inspect(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// lockDatabase runs first on the database at path, then holds its write
// lock (BEGIN IMMEDIATE) on a connection of its own until the test ends.
func lockDatabase(t *testing.T, path, first string) *sql.Conn {
	t.Helper()
	holder := inspect(t, path)
	if _, err := holder.ExecContext(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	conn, err := holder.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// partitionBatch is n records of partition p from offset 0, keys p-0,
// p-1, ...; the one at bad (if in range) has a negative qty.
func partitionBatch(p int32, n, bad int) []record.Record {
	recs := make([]record.Record, n)
	for i := range n {
		qty := 1
		if i == bad {
			qty = -1
		}
		recs[i] = sinktest.Rec(p, int64(i), fmt.Sprintf("%d-%d", p, i), fmt.Sprintf(`{"qty":%d}`, qty))
	}
	return recs
}

// paddedBatch is the b-th batch of n records of partition 0 with values of
// 2 KB (half a page each), keys k<offset>.
func paddedBatch(b, n int) []record.Record {
	value := `{"pad":"` + strings.Repeat("x", 2000) + `"}`
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = sinktest.Rec(0, int64(b*n+i), fmt.Sprintf("k%d", b*n+i), value)
	}
	return recs
}

// holdWriteLock takes the database's write lock from another connection
// until the returned func is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	conn, err := inspect(t, path).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
			t.Error(err)
		}
		conn.Close()
	}
}

// waitWriterLocked waits until the sink's writer waits for the database's
// write lock (in the driver's busy handler), with a Write in hand.
func waitWriterLocked(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, time.Millisecond, func() bool {
		return testenv.Goroutines("sqlite.(*Sink).writer(", "sqlite.busyHandler(") == 1
	}, "the writer waiting for the lock")
}

// waitQueued waits until n Writes wait to hand their batch to the writer.
func waitQueued(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, time.Millisecond, func() bool {
		return testenv.Goroutines("[select", "sqlite.(*Sink).Write(") == n
	}, "%d Writes queued for the writer", n)
}

// Writes that wait for one another share a transaction (group commit),
// and a batch the table refuses fails alone: its savepoint is rolled
// back, the other batches of its group are committed and counted.
func TestSQLiteGroupCommitFailsOnlyTheBadBatch(t *testing.T) {
	const table = `CREATE TABLE t (key TEXT PRIMARY KEY, topic TEXT, partition INTEGER,
		"offset" INTEGER, "timestamp" TEXT, value TEXT %s, headers TEXT, kafka_key BLOB, value_bytes BLOB)`
	for name, ddl := range map[string]string{
		"check": fmt.Sprintf(table, "CHECK (value->>'$.qty' >= 0)"),
		// RAISE(ROLLBACK) ends the whole transaction, not only the statement.
		"trigger rollback": fmt.Sprintf(table, "") + `; CREATE TRIGGER no BEFORE INSERT ON t WHEN NEW.value->>'$.qty' < 0 BEGIN SELECT RAISE(ROLLBACK, 'negative qty'); END`,
		"trigger abort":    fmt.Sprintf(table, "") + `; CREATE TRIGGER no BEFORE INSERT ON t WHEN NEW.value->>'$.qty' < 0 BEGIN SELECT RAISE(ABORT, 'negative qty'); END`,
	} {
		t.Run(name, func(t *testing.T) { testGroupCommitFailsOnlyTheBadBatch(t, ddl) })
	}
}

func testGroupCommitFailsOnlyTheBadBatch(t *testing.T, ddl string) {
	path := filepath.Join(t.TempDir(), "t.db")
	db := inspect(t, path)
	if _, err := db.ExecContext(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	s := openInternal(t, Config{Path: path, Table: "t"})
	release := holdWriteLock(t, path)
	// The first Write is taken by the writer, which waits for the lock;
	// the next five queue behind it and make one group once it is done.
	errs := make([]error, 6)
	var wg sync.WaitGroup
	write := func(p int32, recs []record.Record) {
		defer wg.Done()
		errs[p] = s.Write(t.Context(), recs)
	}
	wg.Add(1)
	go write(0, partitionBatch(0, 100, -1))
	waitWriterLocked(t)
	for p := int32(1); p < 6; p++ {
		bad := -1
		if p == 3 {
			bad = 70 // past the first chunk: the chunk and the rows before it are rolled back too
		}
		wg.Add(1)
		go write(p, partitionBatch(p, 100, bad))
	}
	waitQueued(t, 5)
	release()
	wg.Wait()
	for p, err := range errs {
		var re *record.Error
		switch {
		case p == 3 && (!errors.As(err, &re) || re.Partition != 3 || re.Offset != 70):
			t.Errorf("partition 3's Write = %v, want the *record.Error of orders/3@70", err)
		case p != 3 && err != nil:
			t.Errorf("partition %d's Write = %v, want nil: another batch's bad record failed it", p, err)
		}
	}
	if got := s.commits.Load(); got != 2 {
		t.Errorf("%d commits, want 2 (the first Write, then the five that waited)", got)
	}
	var n, bad int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*), count(*) FILTER (WHERE partition = 3) FROM t`).Scan(&n, &bad); err != nil {
		t.Fatal(err)
	}
	if n != 500 || bad != 0 {
		t.Errorf("the table holds %d rows, %d of partition 3; want 500 and none", n, bad)
	}
	if got := s.Outcomes(); got != (sinks.Outcomes{Inserted: 500}) {
		t.Errorf("outcomes %+v, want 500 inserted", got)
	}
	// The failed batch, without its bad record, goes through after all.
	if err := s.Write(t.Context(), partitionBatch(3, 70, -1)); err != nil {
		t.Fatal(err)
	}
	if got := s.Outcomes(); got.Inserted != 570 {
		t.Errorf("outcomes %+v after the retry, want 570 inserted", got)
	}
}

// A Write whose context ends while it waits returns at once and writes
// nothing; the Writes it waited with are not disturbed.
func TestSQLiteGroupCommitCancelledWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
	release := holdWriteLock(t, path)
	done := make(chan error, 1)
	go func() { done <- s.Write(t.Context(), partitionBatch(0, 10, -1)) }()
	waitWriterLocked(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan error, 1)
	go func() { cancelled <- s.Write(ctx, partitionBatch(1, 10, -1)) }()
	waitQueued(t, 1)
	start := time.Now()
	cancel()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled Write = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the cancelled Write returned after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled Write did not return while the writer waited for the lock")
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the other Write = %v", err)
	}
	var n, p1 int
	if err := inspect(t, path).QueryRowContext(t.Context(), `SELECT count(*), count(*) FILTER (WHERE partition = 1) FROM t`).Scan(&n, &p1); err != nil {
		t.Fatal(err)
	}
	if n != 10 || p1 != 0 {
		t.Errorf("%d rows, %d of the cancelled Write; want 10 and none", n, p1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), partitionBatch(2, 1, -1)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Write after Close = %v, want an error saying the sink is closed", err)
	}
}

// The checkpointer copies the WAL into the database between commits and
// lets the WAL start over, so that the WAL stays near restartFrames pages
// however much a run writes; every committed row can be read meanwhile,
// and the file is whole after Close.
func TestSQLiteCheckpointerBoundsTheWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
	s.restartFrames = 64 // 256 KiB of pages
	db := inspect(t, path)
	var maxWAL int64
	for b := range 60 {
		if err := s.Write(t.Context(), paddedBatch(b, 100)); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != (b+1)*100 {
			t.Fatalf("after batch %d another connection reads %d rows (%v), want %d", b, n, err, (b+1)*100)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			maxWAL = max(maxWAL, fi.Size())
		}
	}
	// 60 batches of ~0.5 MiB: without the WAL starting over it would hold
	// all of them (30 MiB).
	if maxWAL > 6<<20 {
		t.Errorf("the WAL grew to %d MiB, want it to start over near %d pages", maxWAL>>20, s.restartFrames)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var check string
	var n int
	if err := db.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q (%v)", check, err)
	}
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 6000 {
		t.Errorf("%d rows after Close (%v), want 6000", n, err)
	}
}

// In a UTF-16 database the value column is bound as text (a CAST of the
// bytes would read them as UTF-16); in a UTF-8 one the chunks cast
// value_bytes. Either way value holds the value's text exactly.
func TestSQLiteSharedChunkValueText(t *testing.T) {
	for _, enc := range []string{"UTF-8", "UTF-16le"} {
		t.Run(enc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			if _, err := inspect(t, path).ExecContext(t.Context(), "PRAGMA encoding = '"+enc+"'; CREATE TABLE x (a)"); err != nil {
				t.Fatal(err)
			}
			s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
			if (s.shared != nil && s.shared.json >= 0) != (enc == "UTF-8") {
				t.Fatalf("the chunks cast value_bytes in a %s database: %v", enc, s.shared != nil && s.shared.json >= 0)
			}
			recs := make([]record.Record, 200)
			for i := range recs {
				recs[i] = sinktest.Rec(1, int64(i), fmt.Sprintf("k%d", i), fmt.Sprintf(`{"i":%d,"s":"é✓ %d"}`, i, i))
			}
			if err := s.Write(t.Context(), recs); err != nil {
				t.Fatal(err)
			}
			rows, err := inspect(t, path).QueryContext(t.Context(), `SELECT "offset", value, typeof(value), value_bytes, topic, partition FROM t`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var off, part int64
				var value, typ, topic string
				var raw []byte
				if err := rows.Scan(&off, &value, &typ, &raw, &topic, &part); err != nil {
					t.Fatal(err)
				}
				want := string(recs[off].Value)
				if value != want || typ != "text" || string(raw) != want || topic != "orders" || part != 1 {
					t.Errorf("offset %d: value %q (%s), value_bytes %q, %s/%d; want %q as text, orders/1", off, value, typ, raw, topic, part, want)
				}
				n++
			}
			if n != len(recs) {
				t.Errorf("%d rows, want %d", n, len(recs))
			}
			// A key that is not UTF-8 is stored as it is in a UTF-8
			// database; a UTF-16 one would change it (and merge keys
			// that differ in their invalid bytes): a bad record.
			bad := []record.Record{sinktest.Rec(2, 0, "\xff\xfe", `{"n":1}`), sinktest.Rec(2, 1, "\xff\xfd", `{"n":2}`)}
			k, err := sinks.NewKeyer("{{ .Key }}")
			if err != nil {
				t.Fatal(err)
			}
			err = sinktest.Keyed(s, k).Write(t.Context(), bad)
			var re *record.Error
			if enc == "UTF-8" {
				if err != nil {
					t.Fatalf("Write of keys that are not UTF-8 = %v", err)
				}
				var keys []byte
				if err := inspect(t, path).QueryRowContext(t.Context(), `SELECT group_concat(hex(key), ',') FROM (SELECT key FROM t WHERE partition = 2 ORDER BY "offset")`).Scan(&keys); err != nil {
					t.Fatal(err)
				}
				if string(keys) != "FFFE,FFFD" {
					t.Errorf("stored keys %s, want FFFE,FFFD", keys)
				}
			} else if !errors.As(err, &re) || re.Offset != 0 || !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "UTF-16") {
				t.Errorf("Write of keys that are not UTF-8 into a UTF-16 database = %v, want the bad record orders/2@0 saying why", err)
			}
		})
	}
}

// A reader of another process that keeps an old snapshot holds the
// checkpoint back: the writer does not wait for the WAL to start over
// then, and the Writes go on at their pace.
func TestSQLiteCheckpointerHeldBackByReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
	s.restartFrames = 16
	batch := func(b int) []record.Record { return paddedBatch(b, 50) }
	if err := s.Write(t.Context(), batch(0)); err != nil {
		t.Fatal(err)
	}
	reader, err := inspect(t, path).BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	var n int
	if err := reader.QueryRowContext(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 50 {
		t.Fatalf("the reader sees %d rows (%v), want 50", n, err)
	}
	start := time.Now()
	for b := 1; b < 20; b++ {
		if err := s.Write(t.Context(), batch(b)); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("19 Writes took %v behind a reader: the writer waited for a checkpoint the reader holds back", d)
	}
}

// A Write returns once the WAL was synced after its commit, not at the
// commit: while the sync waits, the Write does; the writer meanwhile
// commits the next group.
func TestSQLiteWriteWaitsForTheWALSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
	if s.wal == nil {
		t.Fatal("the sink syncs no WAL file of its own")
	}
	entered, release := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	s.wal.syncFile = func(f *os.File) error {
		entered <- struct{}{}
		once.Do(func() { <-release }) // the first sync waits for the test
		return f.Sync()
	}
	first := make(chan error, 1)
	go func() { first <- s.Write(t.Context(), partitionBatch(0, 10, -1)) }()
	select {
	case <-entered:
	case err := <-first:
		t.Fatalf("the Write returned (%v) without a sync of the WAL", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no sync of the WAL after the commit")
	}
	select {
	case err := <-first:
		t.Fatalf("the Write returned (%v) before the WAL sync after its commit ended", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The writer is not held by the sync: the next group commits (and
	// can be read) while the first still waits.
	second := make(chan error, 1)
	go func() { second <- s.Write(t.Context(), partitionBatch(1, 10, -1)) }()
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; n != 20; {
		if err := inspect(t, path).QueryRowContext(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows committed while a sync waits, want 20", n)
		}
	}
	if got := s.Outcomes(); got.Inserted != 0 {
		t.Errorf("outcomes %+v counted before any sync ended", got)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := s.Outcomes(); got.Inserted != 20 {
		t.Errorf("outcomes %+v, want 20 inserted", got)
	}
}

// A failed sync of the WAL fails the Writes that waited for it, counts
// none of them, and fails every later Write: what reached the disk is
// not known.
func TestSQLiteFailedWALSyncFailsTheSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := openInternal(t, Config{Path: path, Table: "t", CreateTable: true})
	if err := s.Write(t.Context(), partitionBatch(0, 10, -1)); err != nil {
		t.Fatal(err)
	}
	s.wal.syncFile = func(*os.File) error { return errors.New("input/output error") }
	err := s.Write(t.Context(), partitionBatch(1, 10, -1))
	if err == nil || !strings.Contains(err.Error(), "sync the WAL") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("Write with a failing sync = %v, want the sync's error", err)
	}
	s.wal.syncFile = (*os.File).Sync
	if err2 := s.Write(t.Context(), partitionBatch(2, 10, -1)); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("Write after a failed sync = %v, want the same error", err2)
	}
	if got := s.Outcomes(); got.Inserted != 10 {
		t.Errorf("outcomes %+v, want the 10 synced before the failure", got)
	}
}

// The syncer syncs the WAL SQLite writes: next to the database file the
// path's symbolic links lead to, not a stray file next to the link.
func TestSQLiteSyncsTheWALOfALinkedDatabase(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	target, link := filepath.Join(dir, "real", "t.db"), filepath.Join(dir, "link.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(link+"-wal", nil, 0o644); err != nil { // a stray file where the link's WAL would be
		t.Fatal(err)
	}
	s := openInternal(t, Config{Path: link, Table: "t", CreateTable: true})
	if s.wal == nil {
		t.Fatal("the sink syncs no WAL file of its own")
	}
	if got, want := s.wal.path, target+"-wal"; got != want {
		t.Errorf("the syncer syncs %s, want %s", got, want)
	}
	if err := s.Write(t.Context(), partitionBatch(0, 10, -1)); err != nil {
		t.Fatal(err)
	}
}

// A database another connection holds locked when the sink opens it is
// waited for up to OpenTimeout (a plan's sink.retry.max_elapsed), as a
// locked write is retried: the open succeeds once the lock is released
// within it, and fails with the lock's error when the lock outlasts it.
func TestSQLiteOpenRidesOutALock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	conn := lockDatabase(t, path, "PRAGMA journal_mode=WAL")
	cfg := Config{Path: path, Table: "t", CreateTable: true, BusyTimeout: 50 * time.Millisecond, Log: zerolog.New(zerolog.NewTestWriter(t))}

	// The busy handler and the retries of the open share OpenTimeout: the
	// open does not wait it out twice.
	cfg.OpenTimeout = 700 * time.Millisecond
	start := time.Now()
	_, err := New(t.Context(), cfg)
	if took := time.Since(start); err == nil || !sinks.Transient(sqliteTransient(err)) || took < 600*time.Millisecond || took > 1200*time.Millisecond {
		t.Fatalf("open while the lock outlasts OpenTimeout = %v after %s, want the lock's error after about 700ms", err, took)
	}

	released := make(chan error, 1)
	time.AfterFunc(time.Second, func() {
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		released <- err
	})
	cfg.OpenTimeout = 30 * time.Second
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open with the lock released after 1 s: %v", err)
	}
	defer s.Close()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
}

// A database still in rollback-journal mode that another connection is
// writing (as when several processes open a new database at once and one
// of them is switching it to WAL) makes the switch fail at once with
// SQLITE_BUSY, without SQLite's busy handler (which it skips where waiting
// could deadlock): the open retries it within OpenTimeout all the same.
func TestSQLiteOpenRidesOutAnotherWritersSwitchToWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	conn := lockDatabase(t, path, "CREATE TABLE other (x)")
	released := make(chan error, 1)
	time.AfterFunc(time.Second, func() {
		_, err := conn.ExecContext(context.Background(), "ROLLBACK")
		released <- err
	})
	cfg := Config{Path: path, Table: "t", CreateTable: true, BusyTimeout: 50 * time.Millisecond, OpenTimeout: 30 * time.Second, Log: zerolog.New(zerolog.NewTestWriter(t))}
	start := time.Now()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open with another writer's lock released after 1 s: %v after %s", err, time.Since(start))
	}
	defer s.Close()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
}
