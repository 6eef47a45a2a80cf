package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// interrupting wraps a sink and cancels the run after its at-th Write,
// keeping the sink's Sync and CheckResume, which the runner uses.
type interrupting struct {
	sinks.Sink
	at     int64
	before func() // runs before the at-th Write, if set
	cancel context.CancelFunc
	writes atomic.Int64
}

func (s *interrupting) Write(ctx context.Context, batch []record.Record) error {
	if n := s.writes.Add(1); n == s.at {
		if s.before != nil {
			s.before()
		}
		s.cancel()
	}
	return s.Sink.Write(ctx, batch)
}

// Capabilities are the wrapped sink's: interrupting changes only Write.
func (s *interrupting) Capabilities() sinks.Capabilities { return s.Sink.Capabilities() }

// openPlanSink opens p's sink for job, as replay run does.
func openPlanSink(t *testing.T, p *plan.Plan, job *Job) sinks.Sink {
	t.Helper()
	s, err := registry.New(t.Context(), p.Sink, sinks.Options{PlanName: p.Name, RunID: job.RunID(), Group: p.Group, Fingerprint: job.Resolution.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// interruptRun runs p until the at-th Write of its sink (before runs just
// before it), stops it there and returns the group's commits: some
// partition must be past its start and one not finished.
func interruptRun(t *testing.T, p *plan.Plan, at int64, before func()) map[int32]group.Checkpoint {
	t.Helper()
	c := connect(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	sink := openPlanSink(t, p, job)
	_, err = job.Run(ctx, &interrupting{Sink: sink, at: at, before: before, cancel: cancel})
	sink.Close()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	var parts []int32
	for _, r := range job.Resolution.Ranges {
		parts = append(parts, r.Partition)
	}
	cps := commits(t, c, p.Group, p.Source.Topic, parts...)
	past, open := false, false
	for _, cp := range cps {
		past = past || cp.Offset > cp.Start
		open = open || cp.Offset < cp.End
	}
	if !past || !open {
		t.Fatalf("the interruption came too early or too late to test a resume: %v", cps)
	}
	return cps
}

// runResumed prepares p again and runs it into a new sink.
func runResumed(t *testing.T, p *plan.Plan, opts Options) (*Job, *Report, error) {
	t.Helper()
	job, err := Prepare(context.Background(), connect(t, p), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	sink := openPlanSink(t, p, job)
	defer sink.Close()
	rep, err := job.Run(context.Background(), sink)
	return job, rep, err
}

// wantRefusal checks that err refuses the resume (exit 3) with subs in its
// message, and that the group's commits are still before.
func wantRefusal(t *testing.T, p *plan.Plan, err error, before map[int32]group.Checkpoint, subs ...string) {
	t.Helper()
	var se *fault.SafetyError
	if !errors.As(err, &se) {
		t.Fatalf("want a *fault.SafetyError refusing the resume, got %v", err)
	}
	for _, s := range append(subs, "working directory of the first run", "replay the window again from its start") {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal lacks %q:\n%v", s, err)
		}
	}
	// The way out is a typed hint for the caller to word, and the sink's own
	// refusal stays in the chain.
	if h := fault.HintOf(err); h != fault.HintRestart {
		t.Errorf("the refusal's hint is %q, want %q", h, fault.HintRestart)
	}
	if se.Err == nil {
		t.Errorf("the refusal does not carry the sink's error: %v", err)
	}
	var parts []int32
	for part := range before {
		parts = append(parts, part)
	}
	if after := commits(t, connect(t, p), p.Group, p.Source.Topic, parts...); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the refused run changed the commits: %v -> %v", before, after)
	}
}

// allCoords is "p/o" of every offset of the job's ranges.
func allCoords(job *Job) []string {
	var out []string
	for _, r := range job.Resolution.Ranges {
		out = append(out, spanCoords(r.Partition, r.Start, r.End)...)
	}
	return out
}

// Regression: a file-sink run was interrupted, then its staging was lost
// (deleted, or a relative path resolved in another working directory): the
// re-run "resumed", wrote the remainder only, published a partial output
// and succeeded. It is refused now, changing nothing; --restart replays
// the whole window.
func TestResumeRefusesLostFileStaging(t *testing.T) {
	for _, tc := range []struct {
		name, path, extra string
		outputs           []string // the published files
	}{
		{"jsonl", "out.jsonl", "", []string{"out.jsonl"}},
		{"csv", "out.csv", "format: csv, columns: {p: partition, o: offset}, ", []string{"out.csv"}},
		{"per_partition", "out-{partition}.jsonl", "per_partition: true, ", []string{"out-0.jsonl", "out-1.jsonl", "out-2.jsonl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestCluster(t, 3, "orders")
			seed(t, sb, "orders", 6000, t0, time.Hour)
			dir := t.TempDir()
			p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.test
window:
%s
sink: {type: file, path: %q, %sbatch_size: 100}
`, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)), filepath.Join(dir, tc.path), tc.extra))
			staging := filepath.Join(dir, tc.path+".parts")
			outputs := make([]string, len(tc.outputs))
			for i, o := range tc.outputs {
				outputs[i] = filepath.Join(dir, o)
			}
			before := interruptRun(t, p, 7, nil)
			if err := os.RemoveAll(staging); err != nil {
				t.Fatal(err)
			}
			_, _, err := runResumed(t, p, testOptions(t))
			wantRefusal(t, p, err, before, staging+" does not exist", `refusing group "replay.test"`)
			for _, f := range outputs {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("the refused run published %s (stat: %v)", f, err)
				}
			}
			if _, err := os.Stat(staging); !os.IsNotExist(err) {
				t.Errorf("the refused run staged (stat %s: %v)", staging, err)
			}

			// The way out the message names: --restart replays everything.
			opts := testOptions(t)
			opts.Restart = true
			job, _, err := runResumed(t, p, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range outputs {
				if tc.name == "csv" {
					lines := strings.Split(strings.TrimSpace(string(readFileT(t, f))), "\n")
					for _, l := range lines[1:] {
						got = append(got, strings.Replace(l, ",", "/", 1))
					}
					continue
				}
				got = append(got, readCoords(t, f)...)
			}
			if want := allCoords(job); !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("after --restart: %s", diff(want, got))
			}

			// Finished: a re-run has nothing to do and keeps the output; with
			// the output deleted, it is refused instead of succeeding.
			finished := commits(t, connect(t, p), p.Group, "orders", 0, 1, 2)
			if _, _, err := runResumed(t, p, testOptions(t)); err != nil {
				t.Fatalf("re-run of the finished plan: %v", err)
			}
			out := outputs[0]
			if err := os.Remove(out); err != nil {
				t.Fatal(err)
			}
			_, _, err = runResumed(t, p, testOptions(t))
			wantRefusal(t, p, err, finished, "neither its published output "+out)
		})
	}
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A partition whose records were all filtered out still has its staging
// file once committed past its start (File.Sync creates it), so a resume
// does not take it for lost staging.
func TestResumeAfterPartitionAllFiltered(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	var paid, created []string
	for i := range 600 {
		paid = append(paid, order(i, "paid"))
	}
	for i := range 5 {
		created = append(created, order(1000+i, "created"))
	}
	produceValues(t, sb, 0, paid...)
	produceValues(t, sb, 1, created...)
	p, out := errorPlan(t, sb, 2, 50, `filter: value.status == "paid"`)
	c := connect(t, p)
	// Stop once partition 1 (nothing but filtered records) is committed
	// at its end, and partition 0 is in the middle.
	cps := interruptRun(t, p, 3, func() {
		// On the sink's goroutine: a time out is reported by the check after the run.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = testenv.WaitFor(ctx, 20*time.Millisecond, func() bool { return commits(t, c, p.Group, "orders", 1)[1].Offset == 5 })
	})
	if cps[1].Offset != 5 || cps[0].Offset >= cps[0].End {
		t.Fatalf("commits %v: want partition 1 finished, 0 not", cps)
	}
	_, rep, err := runResumed(t, p, testOptions(t))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got, want := readCoords(t, out), spanCoords(0, 0, 600); !slices.Equal(got, want) {
		t.Fatalf("after resume: %s", diff(want, got))
	}
	requireCommitsAtEnds(t, p, rep)
}

// The dead-letter file sink's staging is checked too: dead letters written
// before the interruption would be missing from its output.
func TestResumeRefusesLostDeadLetterStaging(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	var vals []string
	for i := range 400 {
		v := order(i, "paid")
		if i%7 == 0 {
			v = "not json"
		}
		vals = append(vals, v)
	}
	produceValues(t, sb, 0, vals...)
	produceValues(t, sb, 1, vals...)
	p, _ := errorPlan(t, sb, 2, 20, "filter: value.status == \"paid\"\non_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl}")
	dead := filepath.Join(filepath.Dir(plan.ConfigOf[file.Section](&p.Sink).Path), "dead.jsonl")
	before := interruptRun(t, p, 4, nil)
	if err := os.RemoveAll(dead + ".parts"); err != nil {
		t.Fatal(err)
	}
	_, _, err := runResumed(t, p, testOptions(t))
	wantRefusal(t, p, err, before, "dead letters: file sink", dead+".parts does not exist")
}

// Regression: a SQLite sink resumed on a database that was not there (a
// relative path from another working directory, a deleted file) got the
// remainder of the window only. Refused now; so is a table created afresh.
func TestResumeRefusesNewSQLiteDatabase(t *testing.T) {
	for _, lose := range []string{"database", "table"} {
		t.Run(lose, func(t *testing.T) {
			sb := newTestCluster(t, 3, "orders")
			seed(t, sb, "orders", 3000, t0, time.Hour)
			db := filepath.Join(t.TempDir(), "orders.db")
			p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.test
window:
%s
sink: {type: sqlite, path: %s, table: orders, create_table: true, batch_size: 50}
`, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)), db))
			before := interruptRun(t, p, 5, nil)
			want := "the database " + db + " did not exist"
			if lose == "database" {
				for _, f := range []string{db, db + "-wal", db + "-shm"} {
					if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
			} else {
				s, err := sqlite.New(t.Context(), sqlite.Config{Path: db, Table: "orders"})
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				conn, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				_, err = conn.Exec(`DROP TABLE orders`)
				conn.Close()
				if err != nil {
					t.Fatal(err)
				}
				want = "the table orders did not exist in the database " + db
			}
			_, _, err := runResumed(t, p, testOptions(t))
			wantRefusal(t, p, err, before, want)
		})
	}
}

// A range whose records were all deleted by retention (allow_data_loss)
// is committed at its end without a record written: the file sink gets its
// staging file (empty) before that commit, so the resume of an interrupted
// run does not take it for lost staging.
func TestResumeAfterRangeLostToRetention(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 4000, t0, time.Hour)
	p, out := pinPlan(t, sb, "allow_data_loss: true")
	c := connect(t, p)
	res := saveResolution(t, c, p)
	r1 := res.Ranges[1]
	if err := sb.DeleteRecords("orders", 1, r1.End); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job, err := Prepare(ctx, c, p, pinned(t, res))
	if err != nil {
		t.Fatal(err)
	}
	if job.Resume[1] != r1.End || r1.End <= r1.Start {
		t.Fatalf("partition 1 reads from %d, want its end %d (all lost)", job.Resume[1], r1.End)
	}
	sink := openPlanSink(t, p, job)
	_, err = job.Run(ctx, &interrupting{Sink: sink, at: 3, cancel: cancel})
	sink.Close()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	cps := commits(t, c, p.Group, "orders", 0, 1)
	if cps[1].Offset != r1.End || cps[0].Offset >= cps[0].End {
		t.Fatalf("commits %v: want partition 1 at its end, 0 in the middle", cps)
	}
	if _, _, err := runResumed(t, p, testOptions(t)); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got, want := readCoords(t, out), rangeCoords(res.Ranges[:1]); !slices.Equal(got, want) {
		t.Fatalf("after resume: %s", diff(want, got))
	}
}

// A dead-letter staging file emptied after the interruption is refused as
// the sink's is: the commits recorded how much of it was durable.
func TestResumeRefusesTruncatedDeadLetterStaging(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	var vals []string
	for i := range 400 {
		v := order(i, "paid")
		if i%7 == 0 {
			v = "not json"
		}
		vals = append(vals, v)
	}
	produceValues(t, sb, 0, vals...)
	p, _ := errorPlan(t, sb, 1, 20, "filter: value.status == \"paid\"\non_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl}")
	dead := filepath.Join(filepath.Dir(plan.ConfigOf[file.Section](&p.Sink).Path), "dead.jsonl")
	before := interruptRun(t, p, 6, nil)
	staged := filepath.Join(dead+".parts", "partition-0.jsonl")
	if st, err := os.Stat(staged); err != nil || st.Size() == 0 {
		t.Fatalf("dead-letter staging before the truncation: %v (want some dead letters)", err)
	}
	if err := os.Truncate(staged, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err := runResumed(t, p, testOptions(t))
	wantRefusal(t, p, err, before, "dead letters: file sink", "truncated or emptied")
}
