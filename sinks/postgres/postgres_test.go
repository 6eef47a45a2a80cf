package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

func newPostgres(t *testing.T, cfg postgres.Config) *postgres.Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pgHarness runs the conformance suite on Postgres: a target is a table.
type pgHarness struct {
	dsn    string
	tables sinktest.Targets[string]
	// copyThreshold and columns configure the sink (0 and nil: the
	// defaults); contents selects topic, partition, offset, timestamp,
	// value and headers as text from the table.
	copyThreshold int
	columns       plan.Columns
	contents      string
	// ddl, when set, creates each target table by hand (%s is its name).
	ddl string
	// connections configures the sink's connections (0: one).
	connections int
	// checkpoints configures a checkpoint table (a table of its own per
	// target) for ckptGroup.
	checkpoints bool
	ckptTables  sinktest.Targets[string]
}

const ckptGroup = "replay.test"

// features declares the postgres sink's: durable on commit, and (with
// checkpoints) a checkpoint table.
func (h *pgHarness) features() sinktest.Features {
	f := sinktest.Features{Durable: sinktest.OnWrite, Contents: h.columns == nil}
	if h.checkpoints {
		f.CheckpointGroup = ckptGroup
	}
	return f
}

func (h *pgHarness) checkpointConfig(t *testing.T) sqlcheckpoint.Config {
	if !h.checkpoints {
		return sqlcheckpoint.Config{}
	}
	table := h.ckptTables.Get(t, func() string { return testenv.TableName() })
	return sqlcheckpoint.Config{Table: table, Group: ckptGroup, Fingerprint: "f", RunID: "run-1"}
}

func (h *pgHarness) table(t *testing.T) string {
	return h.tables.Get(t, func() string {
		name := testenv.TableName()
		if h.ddl != "" {
			if _, err := testenv.PgConn(t, h.dsn).Exec(t.Context(), fmt.Sprintf(h.ddl, pgx.Identifier{name}.Sanitize())); err != nil {
				t.Fatal(err)
			}
		}
		return name
	})
}

func (h *pgHarness) New(t *testing.T) sinks.Sink { return h.NewKeyed(t, nil) }

func (h *pgHarness) NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink {
	cfg := postgres.Config{DSN: h.dsn, Table: h.table(t), CreateTable: true, Log: zerolog.New(zerolog.NewTestWriter(t)),
		CopyThreshold: h.copyThreshold, Columns: h.columns, Checkpoints: h.checkpointConfig(t), Connections: h.connections}
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *pgHarness) Contents(t *testing.T) []string {
	sel := h.contents
	if sel == "" {
		var out []string
		for _, r := range h.Records(t) {
			out = append(out, sinktest.Expect(r).String())
		}
		return out
	}
	rows, err := testenv.PgConn(t, h.dsn).Query(t.Context(), `SELECT `+sel+` FROM `+pgx.Identifier{h.table(t)}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var r record.Record
		var headers string
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Time, &r.Value, &headers); err != nil {
			t.Fatal(err)
		}
		if r.Headers, err = postgres.DecodeHeaders([]byte(headers)); err != nil {
			t.Fatal(err)
		}
		out = append(out, sinktest.Expect(r).String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Records reads the table back with postgres.ReadRecords, the documented
// decoding of the default layout.
func (h *pgHarness) Records(t *testing.T) []record.Record {
	recs, err := postgres.ReadRecords(t.Context(), testenv.PgConn(t, h.dsn), h.table(t))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestPostgresConformance(t *testing.T) {
	h := &pgHarness{dsn: testenv.Postgres(t), checkpoints: true}
	sinktest.RunWith(t, h, h.features())
}

// pgRow is a row of the default layout; NULL reads as "NULL".
type pgRow struct {
	Key, Topic string
	Partition  int32
	Offset     int64
	Timestamp  time.Time
	// Value is value::text, ValueType its jsonb_typeof, ValueText the text
	// of a JSON string.
	Value, ValueType, ValueText string
	Headers                     string
	// XMin is the transaction that last wrote the row.
	XMin string
}

func readRows(t *testing.T, dsn, table string) map[string]pgRow {
	t.Helper()
	rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT key, topic, partition, "offset", "timestamp", value::text,
		jsonb_typeof(value), value #>> '{}', headers::text, xmin::text FROM `+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]pgRow{}
	for rows.Next() {
		var r pgRow
		var value, typ, text *string
		if err := rows.Scan(&r.Key, &r.Topic, &r.Partition, &r.Offset, &r.Timestamp, &value, &typ, &text, &r.Headers, &r.XMin); err != nil {
			t.Fatal(err)
		}
		r.Timestamp = r.Timestamp.UTC()
		r.Value, r.ValueType, r.ValueText = deref(value), deref(typ), deref(text)
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPostgresRunTwiceSameRows(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	window := sinktest.Window(30, 3)
	sinktest.WriteAll(t, newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true}), window, 1, 10)
	first := readRows(t, dsn, table)
	sinktest.WriteAll(t, newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true}), window, 2, 7)
	second := readRows(t, dsn, table)
	if n := len(sinktest.Want(window)); len(first) != n {
		t.Fatalf("first run stored %d rows, want %d", len(first), n)
	}
	for k, r := range first {
		r2 := second[k]
		r.XMin, r2.XMin = "", ""
		if r2 != r {
			t.Errorf("row %s changed by the second run:\n got %+v\nwant %+v", k, second[k], r)
		}
	}
	if len(second) != len(first) {
		t.Errorf("second run: %d rows, want %d", len(second), len(first))
	}
	r := first["orders/0/"+fmt.Sprint(window[0][0].Offset)]
	if r.Topic != "orders" || r.Partition != 0 || r.Offset != window[0][0].Offset || !r.Timestamp.Equal(window[0][0].Time) {
		t.Errorf("row of the first record: %+v", r)
	}
}

func TestPostgresDuplicateKeyInBatchLastWins(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "a", `{"v":1}`), sinktest.Rec(0, 2, "b", `{"v":2}`), sinktest.Rec(0, 3, "a", `{"v":3}`), sinktest.Rec(0, 4, "a", `{"v":4}`))
	rows := readRows(t, dsn, table)
	if len(rows) != 2 || rows["a"].Offset != 4 || rows["a"].Value != `{"v": 4}` || rows["b"].Offset != 2 {
		t.Errorf("rows = %+v, want a@4 and b@2", rows)
	}
}

func TestPostgresOnConflictIgnoreKeepsFirst(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, OnConflict: "ignore"})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "a", `{"v":1}`))
	sinktest.MustWrite(t, s, sinktest.Rec(0, 2, "a", `{"v":2}`), sinktest.Rec(0, 3, "b", `{"v":3}`), sinktest.Rec(0, 4, "b", `{"v":4}`))
	rows := readRows(t, dsn, table)
	// Within a batch too the first record of a key stays, as it would if the
	// runner had cut the batch between the two.
	if len(rows) != 2 || rows["a"].Offset != 1 || rows["b"].Offset != 3 {
		t.Errorf("rows = %+v, want a@1 and b@3", rows)
	}
}

// The default layout keeps every value's bytes in value_bytes and the
// key's in kafka_key; value is jsonb only for JSON that jsonb takes (NULL
// otherwise: not JSON, invalid UTF-8, a \u0000 escape, a lone surrogate, a
// number beyond numeric); headers keep binary
// values in base64. ReadRecords gives back the exact records.
func TestPostgresValueEncoding(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	withHeaders := sinktest.Rec(0, 6, "", `{"id":6}`)
	withHeaders.Headers = []record.Header{{Key: "trace", Value: []byte("abc")}, {Key: "none"}, {Key: "trace", Value: []byte("d\xffe")}, {Key: "n\x00ul", Value: []byte("a\x00")}}
	written := []record.Record{
		sinktest.Rec(0, 1, "k", "not json {"),
		sinktest.Rec(0, 2, "", "{\n  \"multi\": \"line\", \"n\": 1.0\n}"),
		sinktest.Rec(0, 3, "", ""), // tombstone
		{Topic: "orders", Offset: 4, Value: []byte{}, Time: time.Unix(0, 0).UTC()},
		sinktest.Rec(0, 5, "", "bad \xff utf-8\nand \u2028"),
		withHeaders,
		sinktest.Rec(0, 7, "", `{"s":"nul \u0000 char"}`),
		sinktest.Rec(0, 8, "", `{"a":"\ud800"}`),                       // a lone surrogate: jsonb refuses it
		sinktest.Rec(0, 9, "", `{"n":1e400000}`),                       // beyond numeric
		sinktest.Rec(0, 10, "", `{"n":1.5e-16383}`),                    // a scale beyond numeric's
		sinktest.Rec(0, 11, "", `["\ud83d\ude00",1e131071,"\\u0000"]`), // a surrogate pair, numeric's largest, an escaped backslash: jsonb takes them
	}
	sinktest.MustWrite(t, s, written...)
	rows := readRows(t, dsn, table)
	for key, typ := range map[string]string{"orders/0/1": "NULL", "orders/0/2": "object", "orders/0/3": "NULL", "orders/0/4": "NULL",
		"orders/0/5": "NULL", "orders/0/6": "object", "orders/0/7": "NULL", "orders/0/8": "NULL", "orders/0/9": "NULL", "orders/0/10": "NULL",
		"orders/0/11": "array"} {
		if r, ok := rows[key]; !ok || r.ValueType != typ {
			t.Errorf("%s: value %s of type %s, want %s", key, r.Value, r.ValueType, typ)
		}
	}
	if got, want := rows["orders/0/6"].Headers, `[{"key": "trace", "value": "abc"}, {"key": "none", "value": null}, {"key": "trace", "value": "ZP9l", "value_encoding": "base64"}, {"key": "bgB1bA==", "value": "YQA=", "key_encoding": "base64", "value_encoding": "base64"}]`; got != want {
		t.Errorf("headers = %s, want %s", got, want)
	}
	if got := rows["orders/0/1"].Headers; got != "[]" {
		t.Errorf("no headers stored as %s, want []", got)
	}
	got, err := postgres.ReadRecords(t.Context(), testenv.PgConn(t, dsn), table)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b record.Record) int { return int(a.Offset - b.Offset) })
	if len(got) != len(written) {
		t.Fatalf("%d records read back, want %d", len(got), len(written))
	}
	for i, w := range written {
		sinktest.CompareContents(t, got[i], w)
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

func TestPostgresKeyTemplateRecordError(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	keyer, err := sinks.NewKeyer("{{ .Value.id }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(2, 10, "", `{"id":1}`), sinktest.Rec(2, 11, "", "plain text"), sinktest.Rec(2, 12, "", `{"id":3}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Partition != 2 || re.Offset != 11 || re.Topic != "orders" {
		t.Fatalf("Write = %v, want a *record.Error for orders/2@11", err)
	}
	if rows := readRows(t, dsn, table); len(rows) != 0 {
		t.Errorf("%d rows written, want none", len(rows))
	}
}

func TestPostgresRejectedRowRecordError(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		bad     record.Record
		trigger bool // a trigger raises an exception for key k2 (SQLSTATE P0001)
	}{
		{"key with a NUL byte", sinktest.Rec(1, 21, "k\x002", `{}`), false},
		{"key too long for the index", sinktest.Rec(1, 21, randomText(20000), `{}`), false},
		{"a trigger raises an exception", sinktest.Rec(1, 21, "k2", `{}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := testenv.TableName()
			s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
			if tc.trigger {
				if _, err := testenv.PgConn(t, dsn).Exec(t.Context(), fmt.Sprintf(`
CREATE FUNCTION %[1]s_block() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.key = 'k2' THEN RAISE EXCEPTION 'order %% is blocked by policy', NEW.key; END IF; RETURN NEW; END $$;
CREATE TRIGGER block BEFORE INSERT OR UPDATE ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_block()`, table)); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Write(t.Context(), []record.Record{sinktest.Rec(1, 20, "k1", `{}`), tc.bad, sinktest.Rec(1, 22, "k3", `{}`)})
			var re *record.Error
			if !errors.As(err, &re) || re.Offset != 21 || re.Partition != 1 {
				t.Fatalf("Write = %v, want a *record.Error for orders/1@21", err)
			}
			if !strings.Contains(err.Error(), "postgres sink: upsert into "+table) {
				t.Errorf("error %q does not say what was being done", err)
			}
			if rows := readRows(t, dsn, table); len(rows) != 0 {
				t.Errorf("%d rows written, want none", len(rows))
			}
			// Without the poison record the batch goes through.
			sinktest.MustWrite(t, s, sinktest.Rec(1, 20, "k1", `{}`), sinktest.Rec(1, 22, "k3", `{}`))
			if rows := readRows(t, dsn, table); len(rows) != 2 {
				t.Errorf("%d rows after writing the batch without the poison record, want 2", len(rows))
			}
		})
	}
}

// randomText returns n letters that do not compress.
func randomText(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

func TestPostgresPasswordNeverInErrors(t *testing.T) {
	const secret = "Sup3r-s3cret_pw"
	for _, dsn := range []string{
		"postgres://replay:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"postgres://replay:" + secret + "@127.0.0.1:notaport/test",
		"postgres://replay:" + secret + "@[::1/test",
		"host=127.0.0.1 port=1 user=replay password=" + secret + " connect_timeout=2",
		"host=127.0.0.1 port=oops password='" + secret + "'",
		"postgres://127.0.0.1:1/test?password=" + secret + "&sslmode=disable&connect_timeout=2",
	} {
		var logs strings.Builder
		_, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: "orders", Log: zerolog.New(&logs)})
		if err == nil {
			t.Errorf("NewPostgres(%s) succeeded", strings.ReplaceAll(dsn, secret, "xxxxx"))
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("the password shows in the error or logs: %v %s", strings.ReplaceAll(err.Error(), secret, "<SECRET>"), strings.ReplaceAll(logs.String(), secret, "<SECRET>"))
		}
		if !strings.HasPrefix(err.Error(), "postgres sink: ") {
			t.Errorf("error %q does not say what was being done", err)
		}
	}
}

func TestPostgresConfigErrors(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		name string
		cfg  postgres.Config
		want string
	}{
		{"unknown on_conflict", postgres.Config{Table: "orders", OnConflict: "merge"}, `on_conflict "merge"`},
		{"empty table", postgres.Config{}, `table ""`},
		{"three-part table", postgres.Config{Table: "a.b.c"}, `table "a.b.c"`},
		{"empty schema", postgres.Config{Table: ".orders"}, `table ".orders"`},
		{"unterminated quote", postgres.Config{Table: `"orders`}, "unterminated"},
		{"quote inside a name", postgres.Config{Table: `ord"ers"`}, `table "ord\"ers\""`},
		{"missing table", postgres.Config{Table: "replay_test_no_such_table"}, "check table replay_test_no_such_table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DSN = dsn
			s, err := postgres.New(t.Context(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("NewPostgres succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// Table names are SQL names: unquoted parts fold to lower case, quoted parts
// keep case and special characters, and a schema may qualify the name.
func TestPostgresTableNames(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	schema := fmt.Sprintf("replay_test_schema_%x", rand.Uint32())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	for _, tc := range []struct{ table, want string }{
		{schema + ".Orders", "orders"},
		{schema + `."Mixed Case.Name"`, "Mixed Case.Name"},
		{`"` + schema + `"."we""ird"`, `we"ird`},
	} {
		s := newPostgres(t, postgres.Config{DSN: dsn, Table: tc.table, CreateTable: true})
		sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{}`))
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema, tc.want}.Sanitize()).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: %d rows in %s.%q (%v), want 1", tc.table, n, schema, tc.want, err)
		}
	}
}

// A re-delivery of identical records leaves the rows untouched: the update
// is skipped rather than rewriting (and bloating) the same data.
func TestPostgresRedeliveryDoesNotRewriteRows(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	batch := sinktest.Window(31, 1)[0]
	sinktest.MustWrite(t, s, batch...)
	before := readRows(t, dsn, table)
	if len(before) == 0 {
		t.Fatalf("the first delivery of %d records stored no rows", len(batch))
	}
	sinktest.MustWrite(t, s, batch...)
	after := readRows(t, dsn, table)
	for k, r := range before {
		if after[k].XMin != r.XMin {
			t.Errorf("row %s rewritten by an identical re-delivery", k)
		}
	}
}

// Found by a break-it pass: processes started together (run --join) on a
// new table with create_table failed at random on PostgreSQL's catalog
// (23505 on pg_type_typname_nsp_index): CREATE TABLE IF NOT EXISTS does
// not serialize them. Every one of them now gets the table.
func TestPostgresConcurrentCreateTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	for round := range 3 {
		table := testenv.TableName()
		ckpt := testenv.TableName()
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, CreateTable: true,
					Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", Fingerprint: "f", RunID: "r"}})
				if err != nil {
					errs <- err
					return
				}
				s.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a process creating the table: %v", round, err)
		}
	}
}

// create_table makes a text key column COLLATE "C" (byte order, and a
// primary key cheaper to keep than under a locale), in the default layout
// and in a mapping; keys that sort differently under a locale are stored
// and found again as they are.
func TestPostgresCreatedKeyIsCollateC(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, cols := range []plan.Columns{nil, {{Name: "id", Field: "key"}, {Name: "doc", Field: "value"}}} {
		table := testenv.TableName()
		recs := []record.Record{sinktest.Rec(0, 0, "b", `{"n":1}`), sinktest.Rec(0, 1, "B", `{"n":2}`), sinktest.Rec(0, 2, "é", `{"n":3}`), sinktest.Rec(0, 3, "a", `{"n":4}`)}
		s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, CreateTable: true, Columns: cols})
		sinktest.MustWrite(t, s, recs...)
		col := "key"
		if cols != nil {
			col = "id"
		}
		var collation string
		if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
			WHERE a.attrelid = $1::regclass AND a.attname = $2`, table, col).Scan(&collation); err != nil {
			t.Fatal(err)
		}
		if collation != "C" {
			t.Errorf("columns %v: the key column's collation is %q, want C", cols, collation)
		}
		var order string
		if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT string_agg(`+col+`, ',' ORDER BY `+col+`) FROM `+table).Scan(&order); err != nil {
			t.Fatal(err)
		}
		if order != "B,a,b,é" {
			t.Errorf("columns %v: keys in order %q, want byte order B,a,b,é", cols, order)
		}
		if got := s.Outcomes(); got.Inserted != 4 {
			t.Errorf("outcomes %+v, want 4 inserted", got)
		}
	}
}

// keyedPostgres is a postgres sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedPostgres struct {
	*postgres.Sink
	keyer *sinks.Keyer
}

func (k keyedPostgres) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedPostgres(t *testing.T, keyer *sinks.Keyer, cfg postgres.Config) keyedPostgres {
	t.Helper()
	return keyedPostgres{newPostgres(t, cfg), keyer}
}
