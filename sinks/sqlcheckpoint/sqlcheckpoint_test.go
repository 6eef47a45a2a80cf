package sqlcheckpoint_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"

	"github.com/replay-tool/replay/sinks/sinktest"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// checkpointSink is a sink with a checkpoint table.
type checkpointSink interface {
	sinks.Sink
	sinks.CheckpointStore
}

// testCheckpoints checks a checkpoint table through open, which opens the
// sink for a run on the same target each time.
func testCheckpoints(t *testing.T, open func(t *testing.T, runID string, copyThreshold int) checkpointSink) {
	ctx := t.Context()
	want := func(s checkpointSink, what string, exp map[int32]int64) {
		t.Helper()
		got, err := s.Checkpoints(ctx, "replay.test", "orders")
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, exp) {
			t.Errorf("%s: checkpoints %v, want %v", what, got, exp)
		}
	}
	s := open(t, "run-1", 2)
	want(s, "before any write", map[int32]int64{})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 10, "", `{}`), sinktest.Rec(0, 11, "", `{}`))
	sinktest.MustWrite(t, s, sinktest.Rec(0, 12, "", `{}`), sinktest.Rec(0, 13, "", `{}`), sinktest.Rec(0, 15, "", `{}`)) // through COPY
	sinktest.MustWrite(t, s, sinktest.Rec(3, 7, "", `{}`))
	want(s, "after writes", map[int32]int64{0: 16, 3: 8})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 10, "", `{}`)) // a re-delivery does not move it back
	want(s, "after a re-delivery", map[int32]int64{0: 16, 3: 8})

	// The next batch moves the checkpoint on from there.
	if err := s.Write(ctx, []record.Record{sinktest.Rec(3, 8, "", `{}`), sinktest.Rec(3, 9, "", `{}`)}); err != nil {
		t.Fatal(err)
	}
	want(s, "after more writes", map[int32]int64{0: 16, 3: 10})

	// Another run on the same group sees none of them, and replaces them
	// as it writes.
	other := open(t, "run-2", 1000)
	want(other, "another run", map[int32]int64{})
	sinktest.MustWrite(t, other, sinktest.Rec(0, 3, "", `{}`))
	want(other, "another run after a write", map[int32]int64{0: 4})
	want(s, "the first run after another run's write", map[int32]int64{3: 10})

	if err := other.ResetCheckpoints(ctx, "replay.test", "orders"); err != nil {
		t.Fatal(err)
	}
	want(other, "after a reset", map[int32]int64{})
	want(s, "the first run after a reset", map[int32]int64{})
}

func TestPostgresCheckpoints(t *testing.T) {
	dsn := testenv.Postgres(t)
	table, ckpt := testenv.TableName(), testenv.TableName()
	testCheckpoints(t, func(t *testing.T, runID string, threshold int) checkpointSink {
		return newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold,
			Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "replay.test", Fingerprint: "fp", RunID: runID}})
	})
}

func TestSQLiteCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	testCheckpoints(t, func(t *testing.T, runID string, _ int) checkpointSink {
		return newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true,
			Checkpoints: sqlcheckpoint.Config{Table: "replay_checkpoints", Group: "replay.test", Fingerprint: "fp", RunID: runID}})
	})
}

// The checkpoint is written in the rows' transaction: after writes cut
// short at random points by their deadline, the table never holds a
// checkpoint past the rows it holds.
func TestPostgresCheckpointSameTransaction(t *testing.T) {
	dsn := testenv.Postgres(t)
	table, ckpt := testenv.TableName(), testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: 3,
		Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", RunID: "r"}})
	conn := testenv.PgConn(t, dsn)
	rng := rand.New(rand.NewPCG(7, 7))
	next := int64(0)
	for range 40 {
		var batch []record.Record
		for range 1 + rng.IntN(6) {
			batch = append(batch, sinktest.Rec(0, next, "", `{}`))
			next++
		}
		wctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(2000))*time.Microsecond)
		if err := s.Write(wctx, batch); err != nil {
			next = batch[0].Offset // re-delivered by the next iteration
		}
		cancel()
		// One statement, one snapshot: a Write that gave up on its
		// deadline may still be committing.
		var last int64
		var cp *int64
		if err := conn.QueryRow(t.Context(), `SELECT (SELECT coalesce(max("offset"), -1) FROM `+pgx.Identifier{table}.Sanitize()+`),
	(SELECT next_offset FROM `+pgx.Identifier{ckpt}.Sanitize()+`)`).Scan(&last, &cp); err != nil {
			t.Fatal(err)
		}
		if (cp != nil && *cp != last+1) || (cp == nil && last >= 0) {
			t.Fatalf("checkpoint %v, but the table holds offsets up to %d", cp, last)
		}
	}
}

func TestCheckpointTableNeedsGroup(t *testing.T) {
	_, err := sqlite.New(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "db"), Table: "t", CreateTable: true,
		Checkpoints: sqlcheckpoint.Config{Table: "replay_checkpoints"}})
	if err == nil || !strings.Contains(err.Error(), "no consumer group") {
		t.Errorf("NewSQLite = %v, want an error about the missing group", err)
	}
}

// A row PostgreSQL refuses is pinned to its record with a checkpoint
// table too, through both paths, and the checkpoint does not move.
func TestPostgresCheckpointRejectedRow(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, threshold := range []int{1, 1000} {
		table, ckpt := testenv.TableName(), testenv.TableName()
		keyer, kerr := sinks.NewKeyer("{{ .Key }}")
		if kerr != nil {
			t.Fatal(kerr)
		}
		s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold,
			Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", RunID: "r"}})
		sinktest.MustWrite(t, s, sinktest.Rec(1, 19, "a", `{}`))
		// A key too long for the primary key's index: PostgreSQL refuses the row.
		rng := rand.New(rand.NewPCG(21, 21))
		long := make([]byte, 20000)
		for i := range long {
			long[i] = 'a' + byte(rng.IntN(26))
		}
		err := s.Write(t.Context(), []record.Record{sinktest.Rec(1, 20, "b", `{}`), sinktest.Rec(1, 21, string(long), `{}`), sinktest.Rec(1, 22, "c", `{}`)})
		var re *record.Error
		if !errors.As(err, &re) || re.Offset != 21 {
			t.Fatalf("threshold %d: Write = %v, want a *record.Error for offset 21", threshold, err)
		}
		cps, err := s.Checkpoints(t.Context(), "g", "orders")
		if err != nil || !maps.Equal(cps, map[int32]int64{1: 20}) {
			t.Errorf("threshold %d: checkpoints %v (%v), want 1:20", threshold, cps, err)
		}
	}
}
