package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// A value the column would cut, round or overflow is a bad record naming
// the column and the reason; nothing of its batch is written, and the
// values that fit go in unchanged.
func TestPostgresNoSilentChange(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (id text PRIMARY KEY, code varchar(10), fixed char(3),
	amount numeric(6,2), small smallint, ratio real, at timestamp(0) with time zone, micro timestamptz, tod time, raw bytea, note text)`); err != nil {
		t.Fatal(err)
	}
	cols := plan.Columns{{Name: "id", Field: "key"}, {Name: "code", Field: "value.code"}, {Name: "fixed", Field: "value.fixed"},
		{Name: "amount", Field: "value.amount"}, {Name: "small", Field: "value.small"}, {Name: "ratio", Field: "value.ratio"},
		{Name: "at", Field: "value.at"}, {Name: "micro", Field: "value.micro"}, {Name: "tod", Field: "value.tod"},
		{Name: "raw", Field: "header.raw"}, {Name: "note", Field: "header.note"}}
	s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, Columns: cols})
	ok := sinktest.Rec(0, 1, "ok", `{"code":"0123456789","fixed":"abc","amount":1234.5,"small":-32768,"ratio":0.5,"at":"2026-01-01T00:00:01.000Z","micro":"2026-01-01T00:00:00.123456000Z"}`)
	ok.Headers = []record.Header{{Key: "raw", Value: []byte{0, 0xff}}, {Key: "note", Value: []byte("é")}}
	for _, tc := range []struct {
		value, header, want string
	}{
		{`{"code":"` + strings.Repeat("x", 25) + `"}`, "", "column code (character varying(10)): the value.code has 25 characters, more than 10"},
		{`{"fixed":"abcd"}`, "", "column fixed (character(3)): the value.fixed has 4 characters, more than 3"},
		{`{"amount":1.005}`, "", "column amount (numeric(6,2)): the value.amount 1.005 has 3 decimals, more than 2; it would be rounded"},
		{`{"amount":12345}`, "", "has 5 digits before the point, more than 4; it would overflow"},
		{`{"small":40000}`, "", `column small (smallint): the value.small "40000" is out of the range of smallint`},
		{`{"small":1.5}`, "", "is not an integer"},
		{`{"ratio":0.123456789}`, "", "column ratio (real): the value.ratio 0.123456789 would be rounded to 0.12345679"},
		{`{"at":"2026-01-01T00:00:00.5Z"}`, "", "column at (timestamp(0) with time zone): the value.at 2026-01-01T00:00:00.5Z has more than 0 decimals of a second; it would be rounded"},
		{`{"micro":"9999-12-31T23:59:59.999999999Z"}`, "", "column micro (timestamp with time zone): the value.micro 9999-12-31T23:59:59.999999999Z has more than 6 decimals of a second"},
		{`{"tod":"23:59:59.9999999"}`, "", "column tod (time without time zone): the value.tod 23:59:59.9999999 has more than 6 decimals of a second"},
		{`{}`, "a\x00b", `column note (text): the header "note" holds a NUL byte`},
		{`{}`, "a\xffb", `column note (text): the header "note" holds bytes that are not UTF-8`},
	} {
		bad := sinktest.Rec(0, 2, "bad", tc.value)
		if tc.header != "" {
			bad.Headers = []record.Header{{Key: "note", Value: []byte(tc.header)}}
		}
		err := s.Write(t.Context(), []record.Record{ok, bad})
		var re *record.Error
		if !errors.As(err, &re) || re.Offset != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want a *record.Error for offset 2 saying %q", tc.value, tc.header, err, tc.want)
		}
	}
	if got := rowKeysOf(t, dsn, table, "id"); got != "" {
		t.Fatalf("rows %q written with bad records in their batch", got)
	}
	sinktest.MustWrite(t, s, ok)
	var code, fixed, note string
	var amount, ratio float64
	var small int
	var raw []byte
	if err := conn.QueryRow(t.Context(), `SELECT code, fixed, amount::float8, small, ratio, raw, note FROM `+pgx.Identifier{table}.Sanitize()).Scan(&code, &fixed, &amount, &small, &ratio, &raw, &note); err != nil {
		t.Fatal(err)
	}
	if code != "0123456789" || fixed != "abc" || amount != 1234.5 || small != -32768 || ratio != 0.5 || string(raw) != "\x00\xff" || note != "é" {
		t.Errorf("stored %q %q %v %v %v %q %q", code, fixed, amount, small, ratio, raw, note)
	}
	// timestamp(0) would round the record's milliseconds.
	ts := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, Columns: plan.Columns{{Name: "id", Field: "key"}, {Name: "at", Field: "timestamp"}}})
	if err := ts.Write(t.Context(), []record.Record{sinktest.Rec(0, 3, "t", `{}`)}); err == nil || !strings.Contains(err.Error(), "more than 0 decimals of a second") {
		t.Errorf("a timestamp with milliseconds into timestamp(0): %v, want a bad record", err)
	}
}

// dsnWith sets the query parameter key of URL dsn (user: the URL's user).
func dsnWith(t *testing.T, dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if key == "user" {
		u.User = url.User(value)
		return u.String()
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func rowKeysOf(t *testing.T, dsn, table, col string) string {
	t.Helper()
	var keys string
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT coalesce(string_agg(`+col+`, ',' ORDER BY `+col+`), '') FROM `+pgx.Identifier{table}.Sanitize()).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

// With connections: 4 the conformance suite holds (keys in order, the
// checkpoint store), and the sink uses at most 4 connections.
func TestPostgresConnectionsConformance(t *testing.T) {
	h := &pgHarness{dsn: testenv.Postgres(t), checkpoints: true, connections: 4}
	sinktest.RunWith(t, h, h.features())
}

// A failing shard rolls back every shard and the checkpoint: a batch with
// a row the database refuses leaves nothing in the table, and the error
// is the record's.
func TestPostgresConnectionsCheckpointOnlyWhenAllCommitted(t *testing.T) {
	dsn := testenv.Postgres(t)
	table, ckpt := testenv.TableName(), testenv.TableName()
	cfg := sqlcheckpoint.Config{Table: ckpt, Group: "g", Fingerprint: "f", RunID: "r"}
	s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, CreateTable: true, Connections: 4, Checkpoints: cfg})
	var batch []record.Record
	for i := range 40 {
		batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	sinktest.MustWrite(t, s, batch[:20]...)
	cps, err := s.Checkpoints(t.Context(), "g", "orders")
	if err != nil || cps[0] != 20 {
		t.Fatalf("checkpoints %v (%v), want partition 0 at 20", cps, err)
	}
	// A row the database refuses (a key too long for the index) in one shard.
	bad := batch[20:]
	bad[5].Key = []byte(randomText(20000))
	err = s.Write(t.Context(), bad)
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 25 {
		t.Fatalf("Write = %v, want the *record.Error of offset 25", err)
	}
	if cps, err := s.Checkpoints(t.Context(), "g", "orders"); err != nil || cps[0] != 20 {
		t.Fatalf("checkpoints after a failed shard %v (%v), want partition 0 still at 20", cps, err)
	}
	var rows int
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&rows); err != nil || rows != 20 {
		t.Fatalf("%d rows after the failed batch (%v), want the first batch's 20: no shard of it may stay", rows, err)
	}
	bad[5].Key = []byte("k25")
	sinktest.MustWrite(t, s, bad...)
	if cps, err := s.Checkpoints(t.Context(), "g", "orders"); err != nil || cps[0] != 40 {
		t.Fatalf("checkpoints %v (%v), want partition 0 at 40", cps, err)
	}
	var n int
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil || n != 40 {
		t.Errorf("%d rows (%v), want 40", n, err)
	}
	if o := s.Outcomes(); o.Inserted != 40 || o.Unchanged != 0 {
		t.Errorf("outcomes %+v, want 40 inserted in all and nothing unchanged (the failed batch wrote nothing)", o)
	}
}

// Connections carry application_name replay:<plan> unless the DSN sets
// one; Write uses at most connections of them at once.
func TestPostgresApplicationName(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	names := func() map[string]int {
		rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT application_name, count(*) FROM pg_stat_activity WHERE application_name LIKE 'replay%' AND datname = current_database() GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var n string
			var c int
			if err := rows.Scan(&n, &c); err != nil {
				t.Fatal(err)
			}
			out[n] = c
		}
		return out
	}
	app := fmt.Sprintf("replay:apptest-%x", rand.Uint64())
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, ApplicationName: app, Connections: 3})
	var wg sync.WaitGroup
	for p := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []record.Record
			for i := range 50 {
				batch = append(batch, sinktest.Rec(int32(p), int64(i), "", `{}`))
			}
			if err := s.Write(t.Context(), batch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := names()[app]; got < 1 || got > 3 {
		t.Errorf("%d connections named %s, want 1..3", got, app)
	}
	own := newPostgres(t, postgres.Config{DSN: dsnWith(t, dsn, "application_name", "mine-"+table), Table: table, ApplicationName: app})
	sinktest.MustWrite(t, own, sinktest.Rec(0, 99, "", `{}`))
	var got int
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, "mine-"+table).Scan(&got); err != nil || got == 0 {
		t.Errorf("no connection named by the DSN's application_name (%v)", err)
	}
}

// create_table: true on a table that exists needs no CREATE privilege: a
// role that may only write rows opens the sink (and its checkpoint table).
func TestPostgresCreateTableWithoutCreatePrivilege(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table, ckpt := testenv.TableName(), testenv.TableName()
	newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", Fingerprint: "f", RunID: "r"}})
	role, schema := loginRole(t, dsn, "replay_writer")
	for _, stmt := range []string{
		`REVOKE CREATE ON SCHEMA ` + pgx.Identifier{schema}.Sanitize() + ` FROM PUBLIC`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + pgx.Identifier{table}.Sanitize() + `, ` + pgx.Identifier{ckpt}.Sanitize() + ` TO ` + role,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var canCreate bool
	if err := conn.QueryRow(t.Context(), `SELECT has_schema_privilege($1, $2, 'CREATE')`, role, schema).Scan(&canCreate); err != nil || canCreate {
		t.Fatalf("the role may create in %s (%v): the test proves nothing", schema, err)
	}
	roleDSN := dsnWith(t, dsn, "user", role)
	s := newPostgres(t, postgres.Config{DSN: roleDSN, Table: table, CreateTable: true, Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", Fingerprint: "f", RunID: "r"}})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{}`))
	// A missing table still needs the privilege, and says so.
	_, err := postgres.New(t.Context(), postgres.Config{DSN: roleDSN, Table: testenv.TableName(), CreateTable: true})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("creating a table without the privilege: %v, want permission denied", err)
	}
}

// loginRole creates a role named prefix plus a random suffix that may log
// in and use the tests' schema (returned too), and drops it, with
// whatever was granted to it, when t ends.
func loginRole(t *testing.T, dsn, prefix string) (role, schema string) {
	t.Helper()
	conn := testenv.PgConn(t, dsn)
	if err := conn.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role = fmt.Sprintf("%s_%x", prefix, rand.Uint64())
	for _, stmt := range []string{`CREATE ROLE ` + role + ` LOGIN`, `GRANT USAGE ON SCHEMA ` + pgx.Identifier{schema}.Sanitize() + ` TO ` + role} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer c.Close(ctx)
		for _, stmt := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := c.Exec(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	return role, schema
}

// A connection that cannot create the sink's temporary COPY table (a
// read-only session here) fails with a message that names that table,
// not with a bare CREATE TABLE error about a table the user never named.
func TestPostgresTempTableRefusedIsNamed(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	ro := dsnWith(t, dsn, "options", "-cdefault_transaction_read_only=on")
	s, err := postgres.New(t.Context(), postgres.Config{DSN: ro, Table: table, CreateTable: true})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
		err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "a", `{}`)})
	}
	if err == nil || !strings.Contains(err.Error(), "temporary COPY table replay_batch") || !strings.Contains(err.Error(), "read-only") ||
		!strings.Contains(err.Error(), "a transaction that can write") {
		t.Errorf("a read-only session: %v, want an error naming the temporary COPY table, the read-only transaction and what the sink needs", err)
	}
}
