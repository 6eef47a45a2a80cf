package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// sqliteHarness runs the conformance suite on SQLite: a target is a
// database file in the test's temporary directory.
type sqliteHarness struct {
	paths sinktest.Targets[string]
	// columns is the sink's mapping: mappedColumns, or nil for the default
	// layout.
	columns plan.Columns
	// checkpoints configures a checkpoint table for ckptGroup.
	checkpoints bool
}

const ckptGroup = "replay.test"

func (h *sqliteHarness) path(t *testing.T) string {
	return h.paths.Get(t, func() string { return filepath.Join(t.TempDir(), "replay.db") })
}

func (h *sqliteHarness) New(t *testing.T) sinks.Sink { return h.NewKeyed(t, nil) }

func (h *sqliteHarness) NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink {
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: h.path(t), Table: "orders", CreateTable: true,
		Columns: h.columns, Log: zerolog.New(zerolog.NewTestWriter(t)), Checkpoints: h.checkpointConfig()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *sqliteHarness) Contents(t *testing.T) []string {
	var out []string
	sel := `"key", "topic", "partition", "offset", "timestamp", value_bytes, "headers"`
	if h.columns != nil {
		sel = `id, src_topic, src_partition, src_offset, ts, doc, hdrs`
	}
	for _, r := range readSQLiteSelect(t, h.path(t), "orders", sel) {
		s := sinktest.Stored{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: json.RawMessage("null")}
		ts, err := time.Parse(time.RFC3339Nano, r.Timestamp)
		if err != nil {
			t.Fatalf("row %s: timestamp %q: %v", r.Key, r.Timestamp, err)
		}
		s.Timestamp = ts
		if r.Value != nil {
			if h.columns != nil {
				if v := []byte(*r.Value); utf8.Valid(v) {
					s.Value = json.RawMessage(v) // doc: the value as JSON text
				} else if v, ok := encode.ValueJSON(v); ok {
					s.Value = json.RawMessage(v) // bytes that are not UTF-8: a BLOB of them
				}
			} else if v, ok := encode.ValueJSON([]byte(*r.Value)); ok {
				s.Value = json.RawMessage(v)
			}
		}
		hs, err := sqlite.DecodeHeaders(r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		s.Headers = sinktest.Expect(record.Record{Headers: hs}).Headers // the suite's rendering of what was decoded
		out = append(out, s.String())
	}
	return out
}

// Records reads the default layout back to the original bytes, as docs/semantics.md
// says: kafka_key and value_bytes are the key's and the value's bytes (IS
// NULL tells a null key or a tombstone from an empty one), headers decode
// with DecodeHeaders.
func (h *sqliteHarness) Records(t *testing.T) []record.Record {
	rows, err := openSQLite(t, h.path(t)).QueryContext(t.Context(), `SELECT kafka_key, kafka_key IS NULL, "topic", "partition", "offset", "timestamp",
		value_bytes, value_bytes IS NULL, "headers" FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []record.Record
	for rows.Next() {
		var r record.Record
		var keyNull, valueNull bool
		var ts, hs string
		if err := rows.Scan(&r.Key, &keyNull, &r.Topic, &r.Partition, &r.Offset, &ts, &r.Value, &valueNull, &hs); err != nil {
			t.Fatal(err)
		}
		if r.Key == nil && !keyNull {
			r.Key = []byte{}
		}
		if r.Value == nil && !valueNull {
			r.Value = []byte{}
		}
		if r.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatal(err)
		}
		if r.Headers, err = sqlite.DecodeHeaders(hs); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *sqliteHarness) checkpointConfig() sqlcheckpoint.Config {
	if !h.checkpoints {
		return sqlcheckpoint.Config{}
	}
	return sqlcheckpoint.Config{Table: "replay_checkpoints", Group: ckptGroup, Fingerprint: "f", RunID: "run-1"}
}

// features declares the sqlite sink's: durable on commit, a resume check
// of the database file, and (with checkpoints) a checkpoint table.
func (h *sqliteHarness) features() sinktest.Features {
	f := sinktest.Features{Durable: sinktest.OnWrite, Resumes: true, Contents: h.columns == nil, LoseOutput: func(t *testing.T) {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(h.path(t) + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}}
	if h.checkpoints {
		f.CheckpointGroup = ckptGroup
	}
	return f
}

func TestSQLiteConformance(t *testing.T) {
	h := &sqliteHarness{checkpoints: true}
	sinktest.RunWith(t, h, h.features())
}

// sqliteRow is a row of the default layout as stored (text columns as text).
type sqliteRow struct {
	Key, Topic string
	Partition  int32
	Offset     int64
	Timestamp  string
	Value      *string
	Headers    string
}

// openSQLite opens the database file for inspection, closed when t ends.
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	uri := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	db, err := sql.Open("sqlite", "file:"+uri+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func readSQLite(t *testing.T, path, table string) map[string]sqliteRow {
	t.Helper()
	return readSQLiteSelect(t, path, table, `"key", "topic", "partition", "offset", "timestamp", "value", "headers"`)
}

// readSQLiteSelect reads the rows of a table; sel names its columns for
// the key, topic, partition, offset, timestamp, value and headers.
func readSQLiteSelect(t *testing.T, path, table, sel string) map[string]sqliteRow {
	t.Helper()
	rows, err := openSQLite(t, path).QueryContext(t.Context(), `SELECT `+sel+` FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]sqliteRow{}
	for rows.Next() {
		var r sqliteRow
		if err := rows.Scan(&r.Key, &r.Topic, &r.Partition, &r.Offset, &r.Timestamp, &r.Value, &r.Headers); err != nil {
			t.Fatal(err)
		}
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newSQLite(t *testing.T, cfg sqlite.Config) *sqlite.Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := sqlite.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSQLiteDuplicateKeysInBatch(t *testing.T) {
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		onConflict string
		want       map[string]int64 // key → offset stored
	}{
		// The last offset of a key wins, as if the runner had cut the batch
		// between the two.
		{"update", map[string]int64{"a": 4, "b": 3}},
		// The stored row wins, and within a batch the first record of a key.
		{"ignore", map[string]int64{"a": 1, "b": 2}},
	} {
		t.Run(tc.onConflict, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			s := newKeyedSQLite(t, keyer, sqlite.Config{Path: path, Table: "t", CreateTable: true, OnConflict: tc.onConflict})
			sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "a", `{"v":1}`))
			sinktest.MustWrite(t, s, sinktest.Rec(0, 2, "b", `{"v":2}`), sinktest.Rec(0, 3, "b", `{"v":3}`), sinktest.Rec(0, 4, "a", `{"v":4}`))
			rows := readSQLite(t, path, "t")
			if len(rows) != len(tc.want) {
				t.Fatalf("rows = %+v, want %v", rows, tc.want)
			}
			for k, off := range tc.want {
				if r := rows[k]; r.Offset != off || *r.Value != fmt.Sprintf(`{"v":%d}`, off) {
					t.Errorf("row %s: offset %d value %s, want offset %d", k, r.Offset, *r.Value, off)
				}
			}
		})
	}
}

// The default layout: value_bytes and kafka_key hold the bytes, value the
// JSON (NULL for anything else), headers the JSONL array.
func TestSQLiteStoredForm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	withHeaders := sinktest.Rec(0, 6, "k\x00\xff", `{"id":6}`)
	withHeaders.Headers = []record.Header{{Key: "trace", Value: []byte("abc")}, {Key: "none"}, {Key: "trace", Value: []byte("d\xffe")}}
	withHeaders.Time = time.Date(2026, 11, 3, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	sinktest.MustWrite(t, s,
		sinktest.Rec(0, 1, "", "not json {"),
		sinktest.Rec(0, 2, "", "{\n  \"multi\": \"line\"\n}"),
		sinktest.Rec(0, 3, "", ""), // tombstone
		record.Record{Topic: "orders", Offset: 4, Key: []byte{}, Value: []byte{}, Time: time.Unix(0, 0)},
		sinktest.Rec(0, 5, "", "bad \xff utf-8\nand \u2028\x00"),
		withHeaders,
	)
	db := openSQLite(t, path)
	for key, want := range map[string]struct {
		value, bytes, kafkaKey string // "NULL" for NULL
	}{
		"orders/0/1": {"NULL", "not json {", "NULL"},
		"orders/0/2": {"{\n  \"multi\": \"line\"\n}", "{\n  \"multi\": \"line\"\n}", "NULL"}, // JSON as it is, line breaks and all
		"orders/0/3": {"NULL", "NULL", "NULL"},
		"orders/0/4": {"NULL", "", ""},
		"orders/0/5": {"NULL", "bad \xff utf-8\nand \u2028\x00", "NULL"},
		"orders/0/6": {`{"id":6}`, `{"id":6}`, "k\x00\xff"},
	} {
		var got [3]string
		err := db.QueryRowContext(t.Context(), `SELECT coalesce(value, 'NULL'), CASE WHEN value_bytes IS NULL THEN 'NULL' ELSE value_bytes END,
			CASE WHEN kafka_key IS NULL THEN 'NULL' ELSE kafka_key END FROM t WHERE key = ?`, key).Scan(&got[0], &got[1], &got[2])
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if got != [3]string{want.value, want.bytes, want.kafkaKey} {
			t.Errorf("%s: value, value_bytes, kafka_key = %q, want %q", key, got, want)
		}
	}
	rows := readSQLite(t, path, "t")
	r6 := rows["orders/0/6"]
	if want := `[{"key":"trace","value":"abc"},{"key":"none","value":null},{"key":"trace","value":"ZP9l","value_encoding":"base64"}]`; r6.Headers != want {
		t.Errorf("headers = %s, want %s", r6.Headers, want)
	}
	if hs, err := sqlite.DecodeHeaders(r6.Headers); err != nil || len(hs) != 3 || string(hs[2].Value) != "d\xffe" || hs[1].Value != nil {
		t.Errorf("DecodeHeaders = %q, %v", hs, err)
	}
	if want := "2026-11-03T10:00:00.123Z"; r6.Timestamp != want {
		t.Errorf("timestamp = %s, want %s (UTC, milliseconds)", r6.Timestamp, want)
	}
	if got := rows["orders/0/1"].Headers; got != "[]" {
		t.Errorf("no headers stored as %s, want []", got)
	}
	// SQLite's JSON functions read the columns.
	var id int
	var trace string
	if err := db.QueryRowContext(t.Context(), `SELECT value->>'id', headers->0->>'value' FROM t WHERE key = 'orders/0/6'`).Scan(&id, &trace); err != nil || id != 6 || trace != "abc" {
		t.Errorf("JSON functions: id %d trace %q (%v)", id, trace, err)
	}
	var ddl string
	if err := db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_master WHERE name = 't'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kafka_key" BLOB,`, `"value" TEXT,`, `"value_bytes" BLOB,`, `"headers" TEXT NOT NULL`} {
		if !strings.Contains(ddl, want) {
			t.Errorf("created table lacks %s:\n%s", want, ddl)
		}
	}
}

func TestSQLiteWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
	var mode string
	if err := openSQLite(t, path).QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no write-ahead log next to the database: %v", err)
	}
}

// Two sinks on one file, as two replay processes on one machine: the
// busy timeout makes the second writer wait instead of failing.
func TestSQLiteTwoSinksOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	a := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	b := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	window := sinktest.Window(40, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(window))
	for p, part := range window {
		s := a
		if p%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for _, r := range part {
				if err := s.Write(t.Context(), []record.Record{r}); err != nil {
					errs[p] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got, want := len(readSQLite(t, path, "t")), len(sinktest.Want(window)); got != want {
		t.Errorf("%d rows, want %d", got, want)
	}
}

func TestSQLiteKeyTemplateRecordError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	keyer, err := sinks.NewKeyer("{{ .Value.id }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedSQLite(t, keyer, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(2, 10, "", `{"id":1}`), sinktest.Rec(2, 11, "", "plain text"), sinktest.Rec(2, 12, "", `{"id":3}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Partition != 2 || re.Offset != 11 {
		t.Fatalf("Write = %v, want a *record.Error for orders/2@11", err)
	}
	if rows := readSQLite(t, path, "t"); len(rows) != 0 {
		t.Errorf("%d rows written, want none", len(rows))
	}
}

// A row the table refuses (a CHECK of a table made by hand) is a
// *record.Error for that record, and the transaction leaves nothing behind.
func TestSQLiteRejectedRowRecordError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE t (key TEXT PRIMARY KEY, topic TEXT, partition INTEGER,
		"offset" INTEGER, "timestamp" TEXT, value TEXT CHECK (json_valid(value) AND value->>'$.qty' >= 0), headers TEXT, kafka_key BLOB, value_bytes BLOB)`); err != nil {
		t.Fatal(err)
	}
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t"})
	err := s.Write(t.Context(), []record.Record{sinktest.Rec(1, 20, "", `{"qty":1}`), sinktest.Rec(1, 21, "", `{"qty":-5}`), sinktest.Rec(1, 22, "", `{"qty":2}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 21 || re.Partition != 1 {
		t.Fatalf("Write = %v, want a *record.Error for orders/1@21", err)
	}
	if !strings.Contains(err.Error(), "sqlite sink: upsert into t") {
		t.Errorf("error %q does not say what was being done", err)
	}
	if rows := readSQLite(t, path, "t"); len(rows) != 0 {
		t.Errorf("%d rows written, want none", len(rows))
	}
	sinktest.MustWrite(t, s, sinktest.Rec(1, 20, "", `{"qty":1}`), sinktest.Rec(1, 22, "", `{"qty":2}`))
	if rows := readSQLite(t, path, "t"); len(rows) != 2 {
		t.Errorf("%d rows after writing the batch without the poison record, want 2", len(rows))
	}
}

// A re-delivery of identical records leaves the rows untouched: the update
// is skipped rather than rewriting the same data.
func TestSQLiteRedeliveryDoesNotRewriteRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true})
	db := openSQLite(t, path)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE updates (n INTEGER);
		INSERT INTO updates VALUES (0);
		CREATE TRIGGER count_updates AFTER UPDATE ON t BEGIN UPDATE updates SET n = n + 1; END;`); err != nil {
		t.Fatal(err)
	}
	batch := sinktest.Window(31, 1)[0]
	sinktest.MustWrite(t, s, batch...)
	sinktest.MustWrite(t, s, batch...)
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT n FROM updates").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows rewritten by an identical re-delivery (%v), want 0", n, err)
	}
	changed := batch[0]
	changed.Value = []byte(`{"changed":true}`)
	sinktest.MustWrite(t, s, changed)
	if err := db.QueryRowContext(t.Context(), "SELECT n FROM updates").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows updated by a changed record (%v), want 1", n, err)
	}
}

// Paths are file names, not URIs: characters that mean something in an
// SQLite URI are taken literally.
func TestSQLitePathCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir %20 #1")
	path := filepath.Join(dir, "orders?mode=ro#x.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %s: %v", path, err)
	}
	if n := len(readSQLite(t, path, "orders")); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

func TestSQLiteConfigErrors(t *testing.T) {
	dir := t.TempDir()
	noKey := filepath.Join(dir, "nokey.db")
	if _, err := openSQLite(t, noKey).ExecContext(t.Context(), `CREATE TABLE t (key TEXT, kafka_key BLOB, topic TEXT, partition INTEGER, "offset" INTEGER, "timestamp" TEXT, value TEXT, value_bytes BLOB, headers TEXT)`); err != nil {
		t.Fatal(err)
	}
	oldLayout := filepath.Join(dir, "old.db")
	if _, err := openSQLite(t, oldLayout).ExecContext(t.Context(), `CREATE TABLE t (key TEXT PRIMARY KEY, topic TEXT, partition INTEGER, "offset" INTEGER, "timestamp" TEXT, value TEXT, headers TEXT)`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  sqlite.Config
		want string
	}{
		{"empty path", sqlite.Config{Table: "t"}, "empty path"},
		{"unknown on_conflict", sqlite.Config{Path: filepath.Join(dir, "a.db"), Table: "t", OnConflict: "merge"}, `on_conflict "merge"`},
		{"empty table", sqlite.Config{Path: filepath.Join(dir, "a.db")}, `table ""`},
		{"missing table", sqlite.Config{Path: filepath.Join(dir, "a.db"), Table: "missing"}, "check table missing: no such table in "},
		{"table of the first layout", sqlite.Config{Path: oldLayout, Table: "t", CreateTable: true}, `lacks the column(s) value_bytes, kafka_key of the default layout (it was created by an earlier version of replay, whose value column could not keep bytes that are not JSON text): add them with ALTER TABLE t ADD COLUMN "value_bytes" BLOB; ALTER TABLE t ADD COLUMN "kafka_key" BLOB;`},
		{"version column missing", sqlite.Config{Path: noKey, Table: "t", Version: "offset", Columns: plan.Columns{{Name: "key", Field: "key"}}}, "table t has no column replay_version"},
		{"unknown on_tombstone", sqlite.Config{Path: filepath.Join(dir, "a.db"), Table: "t", OnTombstone: "drop"}, `on_tombstone "drop": want write, delete, skip`},
		{"version that cannot order", sqlite.Config{Path: filepath.Join(dir, "a.db"), Table: "t", Version: "kafka_key"}, `version "kafka_key" cannot order updates`},
		{"table without a unique key", sqlite.Config{Path: noKey, Table: "t"}, "check table t: "},
		{"directory as the database", sqlite.Config{Path: dir, Table: "t", CreateTable: true}, "sqlite sink: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.New(t.Context(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("NewSQLite succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// A write lock held by another process past the busy timeout is a
// transient failure: the runner writes the batch again later.
func TestSQLiteLockedIsTransient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "t", CreateTable: true, BusyTimeout: 100 * time.Millisecond})
	conn, err := openSQLite(t, path).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", "{}")})
	if err == nil || !sinks.Transient(err) {
		t.Fatalf("Write while another connection holds the write lock = %v, want a transient error", err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
}

// keyedSQLite is a sqlite sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedSQLite struct {
	*sqlite.Sink
	keyer *sinks.Keyer
}

func (k keyedSQLite) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedSQLite(t *testing.T, keyer *sinks.Keyer, cfg sqlite.Config) keyedSQLite {
	t.Helper()
	return keyedSQLite{newSQLite(t, cfg), keyer}
}
