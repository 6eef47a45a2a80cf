package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// logLines keeps a sink's log messages, for tests that check which way
// the sink wrote.
type logLines struct{ testenv.Buffer }

// count returns how many lines carry msg, and empties the log.
func (l *logLines) count(msg string) int {
	n := strings.Count(l.String(), `"message":"`+msg+`"`)
	l.Reset()
	return n
}

const (
	copiedMsg   = "copied into the table"
	refusedMsg  = "copy into the table refused a row; upserting the batch"
	upsertedMsg = "upserted"
)

func newLogged(t *testing.T, cfg postgres.Config) (*postgres.Sink, *logLines) {
	t.Helper()
	l := &logLines{}
	cfg.Log = zerolog.New(zerolog.MultiLevelWriter(l, zerolog.NewTestWriter(t))).Level(zerolog.DebugLevel)
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, l
}

func keyed(from, to int, value func(i int) string) []record.Record {
	var out []record.Record
	for i := from; i < to; i++ {
		out = append(out, sinktest.Rec(int32(i%3), int64(i), fmt.Sprint("k", i), value(i)))
	}
	return out
}

func plainValue(i int) string { return fmt.Sprintf(`{"i":%d,"n":1.50}`, i) }

// A fresh load is copied straight into the table, small batches and
// large, and stores exactly the rows the upsert stores.
func TestPostgresFreshLoadCopiesIntoTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	batches := [][]record.Record{keyed(0, 1, plainValue), keyed(1, 40, plainValue), keyed(40, 2000, plainValue)}
	batches[1][7].Value = nil                        // a tombstone: NULL value
	batches[1][8].Value = []byte("\xff\x00not json") // bytes only
	batches[1][9].Headers = []record.Header{{Key: "h", Value: []byte("\x00")}, {Key: "h"}}

	fresh := testenv.TableName()
	s, log := newKeyedLogged(t, keyer, postgres.Config{DSN: dsn, Table: fresh, CreateTable: true})
	for i, b := range batches {
		sinktest.MustWrite(t, s, b...)
		if n := log.count(copiedMsg); n != 1 {
			t.Fatalf("batch %d: %d COPY into the table, want 1", i, n)
		}
	}
	wantOutcomes(t, "fresh load", s.Outcomes(), sinks.Outcomes{Inserted: 2000})

	// The same batches upserted: a table that holds a row at open starts
	// with the upsert, and that row, stored again in every batch, keeps
	// each batch on it.
	upserted := testenv.TableName()
	u, ulog := newKeyedLogged(t, keyer, postgres.Config{DSN: dsn, Table: upserted, CreateTable: true})
	sentinel := sinktest.Rec(0, 99999, "sentinel", `{}`)
	sinktest.MustWrite(t, u, sentinel)
	ulog.count("")
	u2, ulog2 := newKeyedLogged(t, keyer, postgres.Config{DSN: dsn, Table: upserted})
	for _, b := range batches {
		sinktest.MustWrite(t, u2, append([]record.Record{sentinel}, b...)...)
	}
	if n := ulog2.count(copiedMsg); n != 0 {
		t.Fatalf("%d COPY into a table that holds the batches' keys", n)
	}
	got, want := withoutXMin(readRows(t, dsn, fresh)), withoutXMin(readRows(t, dsn, upserted))
	delete(want, "sentinel")
	if len(got) != 2000 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%d rows copied, %d upserted; they differ:\ncopied:   %.400v\nupserted: %.400v", len(got), len(want), got, want)
	}
	var same bool
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT bool_and(a.value_bytes IS NOT DISTINCT FROM b.value_bytes AND a.kafka_key IS NOT DISTINCT FROM b.kafka_key)
FROM `+pgx.Identifier{fresh}.Sanitize()+` a JOIN `+pgx.Identifier{upserted}.Sanitize()+` b USING (key)`).Scan(&same); err != nil || !same {
		t.Errorf("value_bytes / kafka_key differ between the paths (%v)", err)
	}
}

// A batch meeting stored keys falls back to the upsert, which counts them;
// once an upsert inserts every row again, the load is copied again.
func TestPostgresCopyFallsBackOnStoredKeys(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	s, log := newKeyedLogged(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	sinktest.MustWrite(t, s, keyed(0, 10, plainValue)...)
	if n := log.count(copiedMsg); n != 1 {
		t.Fatalf("%d COPY into the empty table, want 1", n)
	}

	before := s.Outcomes()
	overlap := keyed(5, 15, plainValue)
	overlap[1].Value = []byte(`{"i":6,"changed":true}`)
	sinktest.MustWrite(t, s, overlap...)
	wantOutcomes(t, "a batch over 5 stored keys", delta(s, before), sinks.Outcomes{Inserted: 5, Updated: 1, Unchanged: 4})
	if n := log.count(refusedMsg); n != 1 {
		t.Fatalf("%d fallbacks, want 1", n)
	}

	before = s.Outcomes()
	sinktest.MustWrite(t, s, keyed(15, 25, plainValue)...)
	wantOutcomes(t, "new keys after the fallback", delta(s, before), sinks.Outcomes{Inserted: 10})
	if n := log.count(copiedMsg); n != 0 {
		t.Fatalf("%d COPY right after a batch that met stored keys, want the upsert", n)
	}
	sinktest.MustWrite(t, s, keyed(25, 35, plainValue)...)
	if n := log.count(copiedMsg); n != 1 {
		t.Fatalf("%d COPY after an upsert that inserted every row, want 1", n)
	}
	rows := readRows(t, dsn, table)
	if len(rows) != 35 || rows["k6"].Value != `{"i": 6, "changed": true}` || rows["k5"].Offset != 5 {
		t.Errorf("%d rows, k6 %+v, k5 %+v; want 35, k6 changed", len(rows), rows["k6"], rows["k5"])
	}
}

// Columns whose values travel in another type than declared (numeric,
// varchar, a domain) are cast by the upsert, never copied as sent.
func TestPostgresCastColumnsNeverCopied(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	if _, err := conn.Exec(t.Context(), `DO $$ BEGIN CREATE DOMAIN replay_test_text AS text CHECK (VALUE <> ''); EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, ddl := range []string{"n numeric", "n varchar(20)", "n replay_test_text"} {
		t.Run(ddl, func(t *testing.T) {
			table := testenv.TableName()
			if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (k text PRIMARY KEY, `+ddl+`)`); err != nil {
				t.Fatal(err)
			}
			s, log := newKeyedLogged(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table,
				Columns: plan.Columns{{Name: "k", Field: "key"}, {Name: "n", Field: "value.n"}}})
			sinktest.MustWrite(t, s, keyed(0, 20, plainValue)...)
			if n := log.count(copiedMsg); n != 0 {
				t.Errorf("%d COPY into a table whose column n is cast", n)
			}
			var n string
			if err := conn.QueryRow(t.Context(), `SELECT n::text FROM `+pgx.Identifier{table}.Sanitize()+` WHERE k = 'k3'`).Scan(&n); err != nil || n != "1.50" {
				t.Errorf("n = %q (%v), want 1.50", n, err)
			}
		})
	}
}

// A table with row-level security, a rule or a trigger of its own is
// never copied into (COPY ignores rules and RLS refuses it, and only the
// upsert sees what a trigger did): the upsert writes it, with the same rows.
// (An INSERT rule makes the sink refuse the table at open: ON CONFLICT
// cannot be used with it.)
func TestPostgresTablesNotCopiedInto(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	for name, ddl := range map[string]string{
		"row-level security": `ALTER TABLE %[1]s ENABLE ROW LEVEL SECURITY; CREATE POLICY p_all ON %[1]s USING (true) WITH CHECK (true)`,
		"rule":               `CREATE TABLE %[2]s (key text); CREATE RULE r_log AS ON DELETE TO %[1]s DO ALSO INSERT INTO %[2]s VALUES (old.key)`,
		"trigger": `CREATE FUNCTION %[2]s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN new.headers := new.headers; RETURN new; END $$;
CREATE TRIGGER t_same BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[2]s()`,
	} {
		t.Run(name, func(t *testing.T) {
			table, aux := testenv.TableName(), testenv.TableName()
			probe, _ := newLogged(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true}) // the default layout
			probe.Close()
			if _, err := conn.Exec(t.Context(), fmt.Sprintf(ddl, pgx.Identifier{table}.Sanitize(), pgx.Identifier{aux}.Sanitize())); err != nil {
				t.Fatal(err)
			}
			s, log := newLogged(t, postgres.Config{DSN: dsn, Table: table})
			sinktest.MustWrite(t, s, keyed(0, 150, plainValue)...)
			if n := log.count(copiedMsg); n != 0 {
				t.Errorf("%d COPY into a table with %s", n, name)
			}
			wantOutcomes(t, name, s.Outcomes(), sinks.Outcomes{Inserted: 150})
			if rows := readRows(t, dsn, table); len(rows) != 150 {
				t.Errorf("%d rows, want 150", len(rows))
			}
		})
	}
}

// A row a BEFORE trigger skips is counted ignored, not inserted nor
// unchanged, on every statement the sink has: arrays and COPY, with a
// version, with on_conflict: ignore, fresh and re-run.
func TestPostgresTriggerSkippedRowsCounted(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	for name, cfg := range map[string]postgres.Config{"arrays": {}, "COPY": {CopyThreshold: 1}, "version": {Version: "offset"}, "ignore": {OnConflict: "ignore", CopyThreshold: 1}} {
		t.Run(name, func(t *testing.T) {
			table, fn := testenv.TableName(), testenv.TableName()
			cfg.DSN, cfg.Table = dsn, table
			probe, _ := newLogged(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Version: cfg.Version})
			probe.Close()
			if _, err := conn.Exec(t.Context(), fmt.Sprintf(`CREATE FUNCTION %[2]s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF new.key = 'k5' THEN RETURN NULL; END IF; RETURN new; END $$;
CREATE TRIGGER t_skip BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[2]s()`, pgx.Identifier{table}.Sanitize(), pgx.Identifier{fn}.Sanitize())); err != nil {
				t.Fatal(err)
			}
			s, _ := newKeyedLogged(t, mustKeyer(t, "{{ .Key }}"), cfg)
			sinktest.MustWrite(t, s, keyed(0, 10, plainValue)...)
			wantOutcomes(t, "fresh", s.Outcomes(), sinks.Outcomes{Inserted: 9, Ignored: 1})
			before := s.Outcomes()
			sinktest.MustWrite(t, s, keyed(0, 10, plainValue)...)
			want := sinks.Outcomes{Unchanged: 9, Ignored: 1}
			switch {
			case cfg.OnConflict == "ignore":
				want = sinks.Outcomes{Ignored: 10}
			case cfg.Version != "":
				want = sinks.Outcomes{Duplicate: 9, Ignored: 1}
			}
			wantOutcomes(t, "re-run", delta(s, before), want)
			if rows := readRows(t, dsn, table); len(rows) != 9 {
				t.Errorf("%d rows, want 9", len(rows))
			}
		})
	}
}

// A fresh load into a table whose columns are cast (numeric, varchar,
// timestamp: no COPY into the table as sent) is inserted without ON
// CONFLICT, from arrays and from the COPY table, alone, sharded and with
// a checkpoint in its transaction, and stores exactly the rows the upsert
// stores. A batch meeting stored keys falls back to the upsert with its
// counts, and a row the table refuses is a bad record as with the upsert.
func TestPostgresFreshLoadInsertsCastColumns(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	const insertedMsg = "inserted into the table without ON CONFLICT"
	const refusedInsertMsg = "insert into the table refused a row; upserting the batch"
	cols := plan.Columns{{Name: "k", Field: "key"}, {Name: "n", Field: "value.n"}, {Name: "s", Field: "value.s"}, {Name: "t", Field: "timestamp"}}
	value := func(i int) string { return fmt.Sprintf(`{"n":%d.%02d,"s":"v%d"}`, i%1000, i%100, i) }
	create := func(t *testing.T) string {
		table := testenv.TableName()
		if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+
			` (k text PRIMARY KEY, n numeric(6,2) CHECK (n >= 0), s varchar(10), t timestamp)`); err != nil {
			t.Fatal(err)
		}
		return table
	}
	contents := func(t *testing.T, table string) string {
		var out string
		if err := conn.QueryRow(t.Context(), `SELECT coalesce(string_agg(k || ' ' || n::text || ' ' || s || ' ' || t::text, E'\n' ORDER BY k), '') FROM `+
			pgx.Identifier{table}.Sanitize()+` WHERE k <> 'sentinel'`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, cfg := range map[string]postgres.Config{
		"one connection": {},
		"sharded":        {Connections: 2},
		"checkpoint":     {Checkpoints: sqlcheckpoint.Config{Table: "ckpt_" + testenv.TableName(), Group: "g", Fingerprint: "f", RunID: "r"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.DSN, cfg.Columns = dsn, cols
			keyer := mustKeyer(t, "{{ .Key }}")
			batches := [][]record.Record{keyed(0, 5, value), keyed(5, 400, value)} // arrays, then the COPY table
			fresh := create(t)
			cfg.Table = fresh
			s, log := newKeyedLogged(t, keyer, cfg)
			for i, b := range batches {
				sinktest.MustWrite(t, s, b...)
				if n := log.count(insertedMsg); n < 1 {
					t.Fatalf("batch %d: inserted without ON CONFLICT %d times, want at least once", i, n)
				}
			}
			wantOutcomes(t, "fresh load", s.Outcomes(), sinks.Outcomes{Inserted: 400})

			upserted := create(t)
			ucfg := cfg
			ucfg.Table, ucfg.Connections, ucfg.Checkpoints = upserted, 1, sqlcheckpoint.Config{}
			sentinel := sinktest.Rec(0, 99999, "sentinel", `{"n":1,"s":"x"}`)
			first, _ := newKeyedLogged(t, keyer, ucfg)
			sinktest.MustWrite(t, first, sentinel)
			u, ulog := newKeyedLogged(t, keyer, ucfg) // opens a table that holds a row: the upsert
			for _, b := range batches {
				sinktest.MustWrite(t, u, append([]record.Record{sentinel}, b...)...)
			}
			if n := ulog.count(insertedMsg); n != 0 {
				t.Fatalf("%d inserts without ON CONFLICT into a table that holds the batches' keys", n)
			}
			if got, want := contents(t, fresh), contents(t, upserted); got != want || strings.Count(got, "\n") != 399 {
				t.Errorf("the rows inserted differ from the rows upserted:\ninserted: %.300s\nupserted: %.300s", got, want)
			}

			before := s.Outcomes()
			overlap := keyed(395, 410, value)
			overlap[1].Value = []byte(`{"n":1,"s":"changed"}`)
			sinktest.MustWrite(t, s, overlap...)
			wantOutcomes(t, "a batch over 5 stored keys", delta(s, before), sinks.Outcomes{Inserted: 10, Updated: 1, Unchanged: 4})
			if n := log.count(refusedInsertMsg); n < 1 {
				t.Errorf("%d fallbacks, want at least 1", n)
			}

			// Fresh again (the upsert inserted every row): a row the CHECK
			// refuses is a bad record, the others are written.
			before = s.Outcomes()
			sinktest.MustWrite(t, s, keyed(410, 420, value)...)
			bad := keyed(420, 430, value)
			bad[3].Value = []byte(`{"n":-1,"s":"negative"}`)
			skipped := sinktest.WriteSkipping(t, s, bad...)
			if len(skipped) != 1 || skipped[0].Offset != 423 || !strings.Contains(skipped[0].Error(), "SQLSTATE 23514") {
				t.Fatalf("skipped %v, want offset 423 for the check constraint", skipped)
			}
			wantOutcomes(t, "fresh batches, one bad row", delta(s, before), sinks.Outcomes{Inserted: 19})
			var rows int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{fresh}.Sanitize()).Scan(&rows); err != nil || rows != 429 {
				t.Errorf("%d rows (%v), want 429", rows, err)
			}
		})
	}
}

func newKeyedLogged(t *testing.T, keyer *sinks.Keyer, cfg postgres.Config) (keyedPostgres, *logLines) {
	t.Helper()
	s, l := newLogged(t, cfg)
	return keyedPostgres{s, keyer}, l
}
