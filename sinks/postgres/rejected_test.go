package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
			s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold})
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
			newSink := func() keyedPostgres {
				return newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: tc.threshold})
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
			run := func(s keyedPostgres) (skipped []int64, rows map[string]pgRow) {
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
			s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, CreateTable: true})
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
	cfg := postgres.Config{DSN: dsn, Table: table, CreateTable: true}
	newPostgres(t, cfg)
	mustExec(t, dsn, fmt.Sprintf(`
CREATE SEQUENCE %[1]s_calls;
CREATE FUNCTION %[1]s_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF nextval('%[1]s_calls') = 5 THEN RAISE EXCEPTION 'once'; END IF; RETURN NEW; END $$;
CREATE TRIGGER once BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_once()`, table))
	s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), cfg) // sees the trigger: no COPY into the table
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

// With connections above 1 and a unique index on another column, two
// records of one batch with the same value but keys on different shards
// meet in the index. With one such pair, one shard waits for the other's
// uncommitted row, which waits for every shard before it commits: a wait
// PostgreSQL cannot see as a deadlock. With many, the shards wait for each
// other and PostgreSQL ends one (40P01), which would end the same way at
// every retry. Either way the Write neither hangs nor fails as the
// sink's: one record of each pair is a bad record, and under on_error:
// skip the others are written, through the COPY into a fresh table and
// through the upsert alike.
func TestPostgresShardsMeetInAnotherUniqueIndex(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	// The window: 6 batches of 20 records with one pair each (the shard of
	// a key is random per process: both of a pair share one with a
	// chance of 1 in 4), then a batch of 200 whose last 50 records repeat
	// the customers of its first 50. Offsets from 100, keys k0000...
	var window [][]record.Record
	customer := map[int64]string{}
	next := 0
	add := func(n int, customerOf func(i int) int) {
		var b []record.Record
		for i := range n {
			c := fmt.Sprintf("c%d", next+customerOf(i))
			r := sinktest.Rec(0, int64(100+next+i), fmt.Sprintf("k%04d", next+i), fmt.Sprintf(`{"customer":%q}`, c))
			customer[r.Offset] = c
			b = append(b, r)
		}
		window = append(window, b)
		next += n
	}
	for range 6 {
		add(20, func(i int) int { return i % 19 })
	}
	add(200, func(i int) int { return i % 150 })
	const pairs = 6 + 50
	for _, tc := range []struct {
		name      string
		threshold int
		fresh     bool
	}{
		{"copy into a fresh table", 10, true},
		{"upsert", 10, false},
		{"upsert from arrays", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := testenv.TableName()
			cfg := postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: tc.threshold, Connections: 4,
				LockTimeout: 200 * time.Millisecond}
			newPostgres(t, cfg)
			mustExec(t, dsn, fmt.Sprintf(`CREATE UNIQUE INDEX ON %s ((value->>'customer'))`, pgx.Identifier{table}.Sanitize()))
			stored := 0
			if !tc.fresh { // a row that no record meets: the table is not fresh
				mustExec(t, dsn, fmt.Sprintf(`INSERT INTO %s (key, topic, partition, "offset", "timestamp", value, value_bytes, headers)
VALUES ('other', 'orders', 0, 1, now(), '{"customer":"other"}', '{"customer":"other"}', '[]')`, pgx.Identifier{table}.Sanitize()))
				stored = 1
			}
			s := newKeyedPostgres(t, keyer, cfg)
			before := s.Outcomes()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var skipped []*record.Error
			for _, batch := range window {
				for {
					err := s.Write(ctx, batch)
					if err == nil {
						break
					}
					var re *record.Error
					if !errors.As(err, &re) {
						t.Fatalf("Write after %d skipped records: %v", len(skipped), err)
					}
					if !strings.Contains(err.Error(), "SQLSTATE 23505") {
						t.Errorf("skipped %v: the reason is not the unique index", err)
					}
					skipped = append(skipped, re)
					i := slices.IndexFunc(batch, func(r record.Record) bool { return r.Offset == re.Offset })
					if i < 0 {
						t.Fatalf("%v: offset %d is not in the batch", err, re.Offset)
					}
					batch = slices.Delete(slices.Clone(batch), i, i+1)
				}
			}
			if len(skipped) != pairs {
				t.Errorf("skipped %d records, want %d (one of each pair)", len(skipped), pairs)
			}
			rows := readRows(t, dsn, table)
			customers := map[string]int{}
			for _, r := range rows {
				customers[r.Value]++
			}
			if want := next - pairs + stored; len(rows) != want || len(customers) != want {
				t.Errorf("%d rows of %d customers, want %d of as many", len(rows), len(customers), want)
			}
			for _, e := range skipped {
				if c := fmt.Sprintf(`{"customer": %q}`, customer[e.Offset]); customers[c] != 1 {
					t.Errorf("skipped %v, and its customer is stored %d times", e, customers[c])
				}
				if _, ok := rows[fmt.Sprintf("k%04d", e.Offset-100)]; ok {
					t.Errorf("skipped %v, and its key is stored", e)
				}
			}
			wantOutcomes(t, "write", delta(s, before), sinks.Outcomes{Inserted: int64(next - pairs)})
		})
	}
}
