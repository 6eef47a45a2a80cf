package runner

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// failCommitsAfter makes the broker refuse every OffsetCommit of data
// after the first n (with REQUEST_TIMED_OUT on each partition) until the
// returned func is called. The commits of the range starts (every offset
// 0) pass and are not counted: how many requests the runner sends depends
// on how it coalesces its commits, how many carry data past the first
// does not matter.
func failCommitsAfter(sb *sandbox.Sandbox, n int64) (stop func()) {
	var left atomic.Int64
	left.Store(n)
	var failing atomic.Bool
	failing.Store(true)
	sb.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		starts := true
		for _, rt := range kreq.(*kmsg.OffsetCommitRequest).Topics {
			for _, rp := range rt.Partitions {
				starts = starts && rp.Offset == 0
			}
		}
		if !failing.Load() || starts || left.Add(-1) >= 0 {
			return nil, nil, false
		}
		return refusedCommit(kreq, kerr.RequestTimedOut.Code), nil, true
	})
	return func() { failing.Store(false) }
}

// refusedCommit answers the OffsetCommit request kreq with code for every
// partition it names.
func refusedCommit(kreq kmsg.Request, code int16) *kmsg.OffsetCommitResponse {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// countingSink records every record delivered to the sink it wraps, which
// stays a sinks.CheckpointStore.
type countingSink struct {
	checkpointSink
	mu        sync.Mutex
	delivered map[string]int // "partition/offset" → Writes that carried it
}

type checkpointSink interface {
	sinks.Sink
	sinks.CheckpointStore
}

func (s *countingSink) Write(ctx context.Context, batch []record.Record) error {
	err := s.checkpointSink.Write(ctx, batch)
	if err == nil {
		s.mu.Lock()
		for _, r := range batch {
			s.delivered[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
		}
		s.mu.Unlock()
	}
	return err
}

// dbTarget is a database sink under test, with a trigger that counts
// every row the sink asks to insert (re-deliveries included: an upsert
// fires BEFORE INSERT for each proposed row, conflicting or not).
type dbTarget struct {
	sink func(t *testing.T) plan.Sink // a fresh sink section on the same target
	// inserts returns the trigger's count; rows the table's
	// "partition/offset value" strings.
	inserts func(t *testing.T) int
	rows    func(t *testing.T) []string
}

func sqliteTarget(t *testing.T) dbTarget {
	path := filepath.Join(t.TempDir(), "orders.db")
	section := func(*testing.T) plan.Sink {
		return plan.Sink{Type: "sqlite", BatchSize: 10, Config: &sqlite.Section{Path: path,
			Common: dbsection.Common{Table: "orders", CreateTable: true, CheckpointTable: "replay_checkpoints"}}}
	}
	open := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// The table and the trigger exist before the first run.
	s, err := registry.New(t.Context(), section(t), sinks.Options{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := open(t).Exec(`CREATE TABLE inserts (n INTEGER);
CREATE TRIGGER count_inserts BEFORE INSERT ON orders BEGIN INSERT INTO inserts VALUES (1); END;`); err != nil {
		t.Fatal(err)
	}
	return dbTarget{
		sink: section,
		inserts: func(t *testing.T) int {
			var n int
			if err := open(t).QueryRow(`SELECT count(*) FROM inserts`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		rows: func(t *testing.T) []string {
			return queryRows(t, open(t), `SELECT "partition" || '/' || "offset" || ' ' || "value" FROM orders`)
		},
	}
}

func queryRows(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func postgresTarget(t *testing.T) dbTarget {
	dsn := testenv.Postgres(t) // a schema of this test, dropped with its tables
	conn := testenv.PgConn(t, dsn)
	suffix := strings.TrimPrefix(testenv.TableName(), "replay_test_")
	table, ckpt, counter := "replay_test_"+suffix, "replay_test_ckpt_"+suffix, "replay_test_inserts_"+suffix
	section := func(*testing.T) plan.Sink {
		return plan.Sink{Type: "postgres", BatchSize: 10, Config: &postgres.Section{DSN: dsn, CopyThreshold: 5,
			Common: dbsection.Common{Table: table, CreateTable: true, CheckpointTable: ckpt}}}
	}
	s, err := registry.New(t.Context(), section(t), sinks.Options{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	fn := "replay_test_count_" + suffix
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+counter+` (n int);
CREATE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO `+counter+` VALUES (1); RETURN NEW; END $$;
CREATE TRIGGER count_inserts BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+fn+`();`); err != nil {
		t.Fatal(err)
	}
	return dbTarget{
		sink: section,
		inserts: func(t *testing.T) int {
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+counter).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		rows: func(t *testing.T) []string {
			rows, err := conn.Query(t.Context(), `SELECT partition || '/' || "offset" || ' ' || value::text FROM `+table)
			if err != nil {
				t.Fatal(err)
			}
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			return out
		},
	}
}

// The Kafka commit fails after the database committed a batch and its
// checkpoint (the broker refuses every commit of data after the first). The
// resumed run starts each partition at the sink's checkpoint, later than
// the Kafka commit: no record reaches the sink twice over both runs, the
// trigger counts one insert per row, and the table equals one clean run's.
func TestSinkCheckpointCoversFailedCommit(t *testing.T) {
	for name, target := range map[string]func(*testing.T) dbTarget{"sqlite": sqliteTarget, "postgres": postgresTarget} {
		t.Run(name, func(t *testing.T) {
			sb := newTestCluster(t, 2, "orders")
			seed(t, sb, "orders", 200, t0, time.Hour)
			clean := target(t)
			runToTable(t, sb, clean, "replay.clean", map[string]int{}, nil)
			want := clean.rows(t)
			if len(want) != 200 {
				t.Fatalf("a clean run wrote %d rows, want 200", len(want))
			}

			tg := target(t)
			delivered := map[string]int{} // over both runs
			stop := failCommitsAfter(sb, 1)
			runToTable(t, sb, tg, "replay.failing", delivered, func(err error, _ *Report) {
				if err == nil {
					t.Fatal("the run succeeded although its commits failed")
				}
			})
			stop()
			before := commits(t, connect(t, testPlan(t, sb, sinkCheckpointPlan)), "replay.failing", "orders", 0, 1)
			runToTable(t, sb, tg, "replay.failing", delivered, func(err error, rep *Report) {
				if err != nil {
					t.Fatal(err)
				}
				raised := 0
				for _, p := range rep.Partitions {
					if p.From > before[p.Partition].Offset {
						raised++
					}
				}
				if raised == 0 {
					t.Errorf("no partition resumed past its Kafka commit (%v): %+v", before, rep.Partitions)
				}
			})
			for k, n := range delivered {
				if n > 1 {
					t.Errorf("record %s reached the sink %d times", k, n)
				}
			}
			if got := tg.rows(t); !slices.Equal(got, want) {
				t.Errorf("table after the failed and the resumed run: %d rows, a clean run %d", len(got), len(want))
			}
			if n := tg.inserts(t); n != len(want) {
				t.Errorf("the trigger counted %d inserts for %d rows: a record was written twice", n, len(want))
			}
		})
	}
}

const sinkCheckpointPlan = `
version: 1
name: sink-checkpoint
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.sinkckpt
window:
  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}
throttle: {records_per_second: 100000}
retry: {max_elapsed: 0s} # the refused commits fail the run at once
sink: {type: file, path: unused.jsonl, batch_size: 10}
`

// runToTable runs the checkpoint plan with group into tg's table, counting
// in delivered the Writes that carried each record; check sees Run's
// outcome (nil: it must succeed).
func runToTable(t *testing.T, sb *sandbox.Sandbox, tg dbTarget, group string, delivered map[string]int, check func(error, *Report)) {
	t.Helper()
	p := testPlan(t, sb, sinkCheckpointPlan)
	p.Group, p.Sink = group, tg.sink(t)
	job, err := Prepare(t.Context(), connect(t, p), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: job.RunID(), Fingerprint: job.Resolution.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs := &countingSink{checkpointSink: s.(checkpointSink), delivered: delivered}
	rep, err := job.Run(t.Context(), cs)
	if check != nil {
		check(err, rep)
	} else if err != nil {
		t.Fatal(err)
	}
}

// A restarted run (same plan, same ranges, so the same run identity) must
// not resume from the checkpoints of the run it restarts: the fresh run
// resets them, so when its commits fail and it is resumed, every record is
// delivered again exactly once.
func TestSinkCheckpointsResetByRestart(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 200, t0, time.Hour)
	tg := sqliteTarget(t)
	runToTable(t, sb, tg, "replay.restart", map[string]int{}, nil)

	delivered := map[string]int{}
	stop := failCommitsAfter(sb, 1)
	p := testPlan(t, sb, sinkCheckpointPlan)
	p.Group, p.Sink = "replay.restart", tg.sink(t)
	opts := testOptions(t)
	opts.Restart = true
	job, err := Prepare(t.Context(), connect(t, p), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: job.RunID(), Fingerprint: job.Resolution.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(t.Context(), &countingSink{checkpointSink: s.(checkpointSink), delivered: delivered}); err == nil {
		t.Fatal("the restarted run succeeded although its commits failed")
	}
	s.Close()
	stop()
	runToTable(t, sb, tg, "replay.restart", delivered, nil)
	if len(delivered) != 200 {
		t.Errorf("the restarted run and its resume delivered %d records, want all 200", len(delivered))
	}
	for k, n := range delivered {
		if n > 1 {
			t.Errorf("record %s reached the sink %d times", k, n)
		}
	}
}
