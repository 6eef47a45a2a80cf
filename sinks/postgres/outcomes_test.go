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
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

func mustKeyer(t *testing.T, tmpl string) *sinks.Keyer {
	t.Helper()
	k, err := sinks.NewKeyer(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// delta returns what s counted since before.
func delta(s sinks.OutcomeCounter, before sinks.Outcomes) sinks.Outcomes {
	o := s.Outcomes()
	o.Inserted -= before.Inserted
	o.Updated -= before.Updated
	o.Unchanged -= before.Unchanged
	o.Ignored -= before.Ignored
	o.Deleted -= before.Deleted
	o.Absent -= before.Absent
	o.Stale -= before.Stale
	o.Duplicate -= before.Duplicate
	o.Collisions -= before.Collisions
	if before.FirstCollision != "" {
		o.FirstCollision = ""
	}
	return o
}

func wantOutcomes(t *testing.T, what string, got, want sinks.Outcomes) {
	t.Helper()
	if got != want {
		t.Errorf("%s: outcomes %+v, want %+v", what, got, want)
	}
}

// The counts are what PostgreSQL did: a fresh window is inserted, a
// re-run is unchanged, changed records update, on_conflict: ignore
// ignores, through arrays and COPY alike.
func TestPostgresOutcomes(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	for _, threshold := range []int{1, 1000} {
		t.Run(fmt.Sprint("copy above ", threshold), func(t *testing.T) {
			table := testenv.TableName()
			s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold})
			batch := []record.Record{sinktest.Rec(0, 1, "a", `{"v":1}`), sinktest.Rec(0, 2, "b", `{"v":2}`), sinktest.Rec(0, 3, "c", `{"v":3}`)}
			before := s.Outcomes()
			sinktest.MustWrite(t, s, batch...)
			wantOutcomes(t, "fresh", delta(s, before), sinks.Outcomes{Inserted: 3})
			before = s.Outcomes()
			sinktest.MustWrite(t, s, batch...)
			wantOutcomes(t, "re-run", delta(s, before), sinks.Outcomes{Unchanged: 3})
			before = s.Outcomes()
			sinktest.MustWrite(t, s, sinktest.Rec(0, 4, "a", `{"v":4}`), sinktest.Rec(0, 5, "d", `{"v":5}`), sinktest.Rec(0, 3, "c", `{"v":3}`))
			wantOutcomes(t, "update, insert, unchanged", delta(s, before), sinks.Outcomes{Inserted: 1, Updated: 1, Unchanged: 1})
			// Within a batch, a key's earlier record counts as updated by its later one.
			before = s.Outcomes()
			sinktest.MustWrite(t, s, sinktest.Rec(0, 6, "e", `{"v":6}`), sinktest.Rec(0, 7, "e", `{"v":7}`))
			wantOutcomes(t, "a key twice", delta(s, before), sinks.Outcomes{Inserted: 1, Updated: 1})

			ign := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, OnConflict: "ignore", CopyThreshold: threshold})
			before = ign.Outcomes()
			sinktest.MustWrite(t, ign, sinktest.Rec(0, 8, "a", `{"v":8}`), sinktest.Rec(0, 9, "f", `{"v":9}`), sinktest.Rec(0, 10, "f", `{"v":10}`))
			wantOutcomes(t, "ignore", delta(ign, before), sinks.Outcomes{Inserted: 1, Ignored: 2})

			// A sink opened on a table that holds rows starts by leaving out
			// the identical ones: its first batch counts as any other.
			again := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CopyThreshold: threshold})
			before = again.Outcomes()
			sinktest.MustWrite(t, again, sinktest.Rec(0, 4, "a", `{"v":4}`), sinktest.Rec(0, 11, "b", `{"v":11}`), sinktest.Rec(0, 12, "g", `{"v":12}`))
			wantOutcomes(t, "first batch into a full table", delta(again, before), sinks.Outcomes{Inserted: 1, Updated: 1, Unchanged: 1})
		})
	}
}

// A key template that collides across partitions is counted and the
// first pair named; a re-run of one partition is no collision.
func TestPostgresKeyCollisions(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	s := newKeyedPostgres(t, mustKeyer(t, "{{ .Offset }}"), postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	p0 := []record.Record{sinktest.Rec(0, 11, "", `{"p":0}`), sinktest.Rec(0, 12, "", `{"p":0}`)}
	p1 := []record.Record{sinktest.Rec(1, 11, "", `{"p":1}`), sinktest.Rec(1, 12, "", `{"p":1}`), sinktest.Rec(1, 13, "", `{"p":1}`)}
	sinktest.MustWrite(t, s, p0...)
	before := s.Outcomes()
	sinktest.MustWrite(t, s, p1...)
	wantOutcomes(t, "second partition", delta(s, before), sinks.Outcomes{Inserted: 1, Updated: 2, Collisions: 2, FirstCollision: "orders/0/11 and orders/1/11: key 11"})
	before = s.Outcomes()
	sinktest.MustWrite(t, s, p1...)
	wantOutcomes(t, "re-run of the second", delta(s, before), sinks.Outcomes{Unchanged: 3})
}

// rowKeys returns the table's keys, sorted.
func rowKeys(t *testing.T, dsn, table string) string {
	t.Helper()
	var keys string
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT coalesce(string_agg(key || '@' || "offset", ',' ORDER BY key), '') FROM `+pgx.Identifier{table}.Sanitize()).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

// on_tombstone: delete applies a batch's records of a key in order: the
// last one decides, whether the batch goes through arrays or COPY, and a
// re-run leaves the table as it is.
func TestPostgresTombstoneDelete(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	for _, threshold := range []int{1, 1000} {
		t.Run(fmt.Sprint("copy above ", threshold), func(t *testing.T) {
			table := testenv.TableName()
			s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold, OnTombstone: dbsection.OnTombstoneDelete})
			sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "x", `{"v":1}`), sinktest.Rec(0, 2, "y", `{"v":2}`))
			window := []record.Record{
				sinktest.Rec(0, 3, "k", `{"v":3}`), sinktest.Rec(0, 4, "k", ""), sinktest.Rec(0, 5, "k", `{"v":5}`), // ends with the row
				sinktest.Rec(0, 6, "m", `{"v":6}`), sinktest.Rec(0, 7, "m", ""), // ends without
				sinktest.Rec(0, 8, "x", ""), // deletes a stored row
				sinktest.Rec(0, 9, "z", ""), // nothing to delete
			}
			before := s.Outcomes()
			sinktest.MustWrite(t, s, window...)
			if got, want := rowKeys(t, dsn, table), "k@5,y@2"; got != want {
				t.Fatalf("rows %s, want %s", got, want)
			}
			wantOutcomes(t, "tombstones", delta(s, before), sinks.Outcomes{Inserted: 1, Updated: 2, Deleted: 2, Absent: 2})
			before = s.Outcomes()
			sinktest.MustWrite(t, s, window...)
			if got, want := rowKeys(t, dsn, table), "k@5,y@2"; got != want {
				t.Fatalf("rows after the re-run %s, want %s", got, want)
			}
			wantOutcomes(t, "re-run", delta(s, before), sinks.Outcomes{Unchanged: 1, Updated: 2, Deleted: 1, Absent: 3})

			// skip writes nothing and counts the tombstones as ignored;
			// write stores a row with NULL value and value_bytes.
			skip := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CopyThreshold: threshold, OnTombstone: dbsection.OnTombstoneSkip})
			before = skip.Outcomes()
			sinktest.MustWrite(t, skip, sinktest.Rec(0, 10, "y", ""))
			wantOutcomes(t, "skip", delta(skip, before), sinks.Outcomes{Ignored: 1})
			write := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CopyThreshold: threshold})
			sinktest.MustWrite(t, write, sinktest.Rec(0, 11, "y", ""))
			var null bool
			if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT value IS NULL AND value_bytes IS NULL FROM `+pgx.Identifier{table}.Sanitize()+` WHERE key = 'y'`).Scan(&null); err != nil || !null {
				t.Errorf("a tombstone written: value and value_bytes NULL = %v (%v), want true", null, err)
			}
		})
	}
}

// A table already holding newer versions of some keys: a replay with
// version leaves them, inserts the missing keys and counts the stale and
// duplicate updates; the re-run changes nothing.
func TestPostgresVersionGuard(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer := mustKeyer(t, "{{ .Key }}")
	for _, version := range []string{"value.updated_at", "value.rev", "header.rev"} {
		t.Run(version, func(t *testing.T) {
			table := testenv.TableName()
			rec := func(off int64, key string, rev int) record.Record {
				r := sinktest.Rec(0, off, key, fmt.Sprintf(`{"rev":%d,"updated_at":"2026-11-%02dT00:00:00Z","off":%d}`, rev, rev, off))
				r.Headers = []record.Header{{Key: "rev", Value: []byte(fmt.Sprint(rev))}}
				return r
			}
			live := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Version: version})
			// The live pipeline: a at rev 20, b at rev 9 (a number that sorts
			// after 10 as text: the guard compares numbers as numbers).
			sinktest.MustWrite(t, live, rec(100, "a", 20), rec(101, "b", 9))
			s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, Version: version, CopyThreshold: 2})
			window := []record.Record{rec(1, "a", 10), rec(2, "b", 9), rec(3, "c", 5), rec(4, "b", 10), rec(5, "d", 10)}
			before := s.Outcomes()
			if err := s.Write(t.Context(), window[:3]); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(t.Context(), window[3:]); err != nil {
				t.Fatal(err)
			}
			if got, want := rowKeys(t, dsn, table), "a@100,b@4,c@3,d@5"; got != want {
				t.Errorf("rows %s, want %s", got, want)
			}
			wantOutcomes(t, "replay", delta(s, before), sinks.Outcomes{Inserted: 2, Updated: 1, Stale: 1, Duplicate: 1})
			before = s.Outcomes()
			sinktest.MustWrite(t, s, window[:3]...)
			sinktest.MustWrite(t, s, window[3:]...)
			if got, want := rowKeys(t, dsn, table), "a@100,b@4,c@3,d@5"; got != want {
				t.Errorf("rows after the re-run %s, want %s", got, want)
			}
			wantOutcomes(t, "re-run", delta(s, before), sinks.Outcomes{Stale: 2, Duplicate: 3})
			// A record without the version is a bad record, not a blind overwrite.
			noVersion := sinktest.Rec(0, 6, "a", `{"other":1}`)
			if err := s.Write(t.Context(), []record.Record{noVersion}); !isRecordError(err, 6) {
				t.Errorf("a record without %s: %v, want its *record.Error", version, err)
			}
		})
	}
}

func isRecordError(err error, offset int64) bool {
	var re *record.Error
	return errors.As(err, &re) && re.Offset == offset
}

// The default layout's version column: create_table adds replay_version,
// and a table without it is refused with the ALTER TABLE that adds it.
func TestPostgresVersionColumn(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	_, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, Version: "offset"})
	if err == nil || !strings.Contains(err.Error(), `ADD COLUMN "replay_version" bigint`) {
		t.Fatalf("New on a table without replay_version: %v, want the ALTER TABLE that adds it", err)
	}
	other := testenv.TableName()
	newPostgres(t, postgres.Config{DSN: dsn, Table: other, CreateTable: true, Version: "timestamp"})
	var typ string
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'replay_version'`, other).Scan(&typ); err != nil || typ != "timestamp with time zone" {
		t.Errorf("replay_version is %q (%v), want timestamp with time zone", typ, err)
	}
}

// A table of the layout before value_bytes and kafka_key is refused with
// the statement that brings it up to date, not written in another shape.
func TestPostgresOldLayoutRefused(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	if _, err := testenv.PgConn(t, dsn).Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (key text PRIMARY KEY, topic text NOT NULL,
	partition int NOT NULL, "offset" bigint NOT NULL, "timestamp" timestamptz NOT NULL, value jsonb, headers jsonb NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	if err == nil || !strings.Contains(err.Error(), `ADD COLUMN "value_bytes" bytea, ADD COLUMN "kafka_key" bytea`) {
		t.Fatalf("New on the old layout: %v, want the ALTER TABLE that adds value_bytes and kafka_key", err)
	}
}

// With a version, records of one key inside one batch resolve as separate
// batches would: a later record with a smaller version is stale, not the
// row's new contents, through arrays and COPY, with one connection or
// several.
func TestPostgresVersionOrderInsideBatch(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, cfg := range []postgres.Config{{CopyThreshold: 1}, {CopyThreshold: 1000}, {Connections: 3}} {
		t.Run(fmt.Sprintf("copy above %d, %d connections", cfg.CopyThreshold, max(cfg.Connections, 1)), func(t *testing.T) {
			table := testenv.TableName()
			cfg.DSN, cfg.Table, cfg.CreateTable, cfg.Version = dsn, table, true, "value.v"
			s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), cfg)
			v := func(off int64, key string, v int) record.Record {
				return sinktest.Rec(0, off, key, fmt.Sprintf(`{"v":%d}`, v))
			}
			sinktest.MustWrite(t, s, v(0, "stored", 9))
			before := s.Outcomes()
			sinktest.MustWrite(t, s, v(1, "a", 5), v(2, "b", 1), v(3, "a", 3), v(4, "b", 2), v(5, "a", 5), v(6, "stored", 7), v(7, "stored", 9), v(8, "b", 4))
			if got, want := rowKeys(t, dsn, table), "a@1,b@8,stored@0"; got != want {
				t.Errorf("rows %s, want %s", got, want)
			}
			wantOutcomes(t, "one batch", delta(s, before), sinks.Outcomes{Inserted: 2, Updated: 2, Stale: 2, Duplicate: 2})
		})
	}
}
