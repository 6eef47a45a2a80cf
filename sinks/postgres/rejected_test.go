package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
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

func mustExec(t *testing.T, dsn, sql string) {
	t.Helper()
	if _, err := testenv.PgConn(t, dsn).Exec(t.Context(), sql); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, dsn, table string) int {
	t.Helper()
	var n int
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// blockOne makes a trigger on table raise an exception for key k0137.
func blockOne(t *testing.T, dsn, table string) {
	mustExec(t, dsn, fmt.Sprintf(`
CREATE FUNCTION %[1]s_block() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.key = 'k0137' THEN RAISE EXCEPTION 'order %% is blocked by policy', NEW.key; END IF; RETURN NEW; END $$;
CREATE TRIGGER block BEFORE INSERT OR UPDATE ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_block()`, table))
}

// A trigger that raises for one row of a large batch makes that row a bad
// record: under on_error: skip the others are written (through arrays
// and through COPY alike) and it alone is skipped, with the trigger's
// message; under on_error: fail the Write names it and writes nothing, and
// the records before it are written.
func TestPostgresTriggerRejectsOneRow(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	for _, threshold := range []int{10, 1000} {
		t.Run(fmt.Sprint("copy above ", threshold), func(t *testing.T) {
			table := testenv.TableName()
			s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Keyer: keyer, CopyThreshold: threshold})
			blockOne(t, dsn, table)
			batch := orders(400, 400)

			err := s.Write(t.Context(), batch)
			var re *record.Error
			if !errors.As(err, &re) || re.Offset != 237 {
				t.Fatalf("Write = %v, want the *record.Error of orders/0@237", err)
			}
			if !strings.Contains(err.Error(), "order k0137 is blocked by policy") {
				t.Errorf("error %q does not carry the trigger's message", err)
			}
			if n := countRows(t, dsn, table); n != 0 {
				t.Fatalf("%d rows after the failed Write, want none", n)
			}
			// on_error: fail writes the records before it.
			sinktest.MustWrite(t, s, batch[:137]...)
			if n := countRows(t, dsn, table); n != 137 {
				t.Fatalf("%d rows after writing the records before the bad one, want 137", n)
			}

			before := s.Outcomes()
			skipped := sinktest.WriteSkipping(t, s, batch...)
			if len(skipped) != 1 || skipped[0].Offset != 237 || !strings.Contains(skipped[0].Error(), "order k0137 is blocked by policy") {
				t.Fatalf("skipped %v, want orders/0@237 with the trigger's message", skipped)
			}
			if n := countRows(t, dsn, table); n != 399 {
				t.Errorf("%d rows, want 399", n)
			}
			wantOutcomes(t, "skip", delta(s, before), sinks.Outcomes{Inserted: 262, Unchanged: 137})
		})
	}
}

// A unique index on another column rejects the rows beyond the first of
// each value, within a batch and against the rows stored, as bad records;
// a deferred one too. Re-running the window skips the same records and
// leaves the table as it was.
func TestPostgresUniqueIndexRejectsDuplicates(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	for _, tc := range []struct {
		name      string
		threshold int
		index     string
	}{
		{"arrays", 1000, `CREATE UNIQUE INDEX ON %s ((value->>'customer'))`},
		{"copy", 10, `CREATE UNIQUE INDEX ON %s ((value->>'customer'))`},
		{"deferred", 1000, `ALTER TABLE %s ADD COLUMN customer text GENERATED ALWAYS AS (value->>'customer') STORED UNIQUE DEFERRABLE INITIALLY DEFERRED`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := testenv.TableName()
			newSink := func() *postgres.Sink {
				return newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Keyer: keyer, CopyThreshold: tc.threshold})
			}
			s := newSink()
			mustExec(t, dsn, fmt.Sprintf(tc.index, pgx.Identifier{table}.Sanitize()))
			// 300 records of 250 customers in two batches: the second
			// batch's records 250..299 repeat the customers of 0..49.
			all := orders(300, 250)
			window := [][]record.Record{all[:200], all[200:]}
			var wantSkipped []int64
			for i := 250; i < 300; i++ {
				wantSkipped = append(wantSkipped, int64(100+i))
			}
			run := func(s *postgres.Sink) (skipped []int64, rows map[string]pgRow) {
				for _, b := range window {
					for _, e := range sinktest.WriteSkipping(t, s, b...) {
						if !strings.Contains(e.Error(), "violates unique constraint") || !strings.Contains(e.Error(), "SQLSTATE 23505") {
							t.Errorf("skipped %v: the reason does not name the constraint", e)
						}
						skipped = append(skipped, e.Offset)
					}
				}
				return skipped, readRows(t, dsn, table)
			}
			before := s.Outcomes()
			skipped, rows := run(s)
			if fmt.Sprint(skipped) != fmt.Sprint(wantSkipped) {
				t.Errorf("skipped %v, want %v", skipped, wantSkipped)
			}
			if len(rows) != 250 {
				t.Errorf("%d rows, want 250", len(rows))
			}
			wantOutcomes(t, "first run", delta(s, before), sinks.Outcomes{Inserted: 250})

			again := newSink()
			before = again.Outcomes()
			skipped2, rows2 := run(again)
			if fmt.Sprint(skipped2) != fmt.Sprint(wantSkipped) {
				t.Errorf("re-run skipped %v, want %v", skipped2, wantSkipped)
			}
			if fmt.Sprint(rows2) != fmt.Sprint(rows) {
				t.Errorf("the re-run changed the table")
			}
			wantOutcomes(t, "re-run", delta(again, before), sinks.Outcomes{Unchanged: 250})
		})
	}
}

// An error that may pass by itself stays transient, whatever raised it:
// it is retried, never made a bad record.
func TestPostgresTransientIsNoBadRecord(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, code := range []string{"40001", "40P01", "57P01", "53300", "08006"} {
		t.Run(code, func(t *testing.T) {
			table := testenv.TableName()
			s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Keyer: mustKeyer(t, "{{ .Key }}")})
			mustExec(t, dsn, fmt.Sprintf(`
CREATE FUNCTION %[1]s_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.key = 'k0003' THEN RAISE EXCEPTION 'passing trouble' USING ERRCODE = '%[2]s'; END IF; RETURN NEW; END $$;
CREATE TRIGGER fail BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_fail()`, table, code))
			err := s.Write(t.Context(), orders(10, 10))
			var re *record.Error
			if err == nil || errors.As(err, &re) || !sinks.Transient(err) {
				t.Fatalf("Write = %v, want a transient error that is no *record.Error", err)
			}
		})
	}
}

// A rejection that no row causes again on its own (here a trigger that
// raises once; in a run, a row of another partition's transaction that
// was rolled back) is transient: the batch is written again, whole.
func TestPostgresRejectionNotPinnedIsTransient(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	cfg := postgres.Config{DSN: dsn, Table: table, CreateTable: true, Keyer: mustKeyer(t, "{{ .Key }}")}
	newPostgres(t, cfg)
	mustExec(t, dsn, fmt.Sprintf(`
CREATE SEQUENCE %[1]s_calls;
CREATE FUNCTION %[1]s_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF nextval('%[1]s_calls') = 5 THEN RAISE EXCEPTION 'once'; END IF; RETURN NEW; END $$;
CREATE TRIGGER once BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_once()`, table))
	s := newPostgres(t, cfg) // sees the trigger: no COPY into the table
	batch := orders(10, 10)
	err := s.Write(t.Context(), batch)
	var re *record.Error
	if err == nil || errors.As(err, &re) || !sinks.Transient(err) {
		t.Fatalf("Write = %v, want a transient error that is no *record.Error", err)
	}
	sinktest.MustWrite(t, s, batch...)
	if n := countRows(t, dsn, table); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
}
