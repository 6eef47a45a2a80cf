package runner

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// faultRetry is the source retry tuning of the fault tests: a stalled
// request is given up on quickly, and a commit of unknown outcome settles
// after the stall has ended.
// (The reader's fetches never wait here, data lies below every range's
// end, so the request timeout may be below the fetch's MaxWait.)
var faultRetry = source.RetryPolicy{RequestTimeout: 100 * time.Millisecond, SettleDelay: 200 * time.Millisecond,
	MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

const faultStall = 150 * time.Millisecond

// faultRun is one run of the fault tests' plan into its own table and group.
type faultRun struct {
	elapsed time.Duration
	retries int64
	job     *Job
	rows    []string
	c       *Cluster
	p       *plan.Plan
	err     error
}

// faultWindow is the time window of TestFaults.
var faultWindow = fmt.Sprintf("window: {from: %s, to: %s}", t0.Add(10*time.Minute).Format(time.RFC3339), t0.Add(50*time.Minute).Format(time.RFC3339))

// runFaultPlan runs a window of orders (extra: the plan's window and more) into a postgres table of its
// own (a commit after every batch), under the group replay.<name>.
func runFaultPlan(t *testing.T, addr, dsn, name, extra string) faultRun {
	t.Helper()
	table := "faults_" + strings.NewReplacer("-", "_", "/", "_").Replace(strings.ToLower(name))
	p := testPlanAt(t, addr, fmt.Sprintf(`
version: 1
name: faults
source: {brokers: ["%s"], topic: orders}
group: replay.%s
%s
sink: {type: postgres, dsn: "%s", table: %s, create_table: true, batch_size: 500}
throttle: {records_per_second: 10000}
`, addr, table, extra, dsn, table))
	c, err := Connect(t.Context(), p.Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	opts := testOptions(t)
	opts.SourceRetry = faultRetry
	start := time.Now()
	before := c.Retries()
	job, err := Prepare(t.Context(), c, p, opts)
	r := faultRun{c: c, p: p, job: job, err: err}
	if err == nil {
		var s sinks.Sink
		if s, err = registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: job.RunID()}); err != nil {
			t.Fatal(err)
		}
		_, r.err = job.Run(t.Context(), s)
		s.Close()
	}
	r.elapsed, r.retries = time.Since(start), c.Retries()-before
	if r.err == nil {
		r.rows = testenv.PgCoords(t, dsn, table)
	}
	return r
}

// seedChunks produces n chunks of size orders over the hour from t0, one
// produce call each: many small record batches, as a live topic has, so
// the window takes many fetches.
func seedChunks(t *testing.T, sb *sandbox.Sandbox, n, size int) {
	t.Helper()
	step := time.Hour / time.Duration(n)
	for i := range n {
		s := sandbox.Seed{Topic: "orders", N: size, From: t0.Add(time.Duration(i) * step), To: t0.Add(time.Duration(i+1) * step), Rand: uint64(i + 1)}
		if err := sandbox.Produce(t.Context(), sb.Addr, s); err != nil {
			t.Fatal(err)
		}
	}
}

func testPlanAt(t *testing.T, addr, yaml string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse(t.Name()+".yaml", []byte(yaml), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

// checkExact compares the run's sink with kcat's read of the window, and
// its commits with the ranges' ends.
func checkExact(t *testing.T, r faultRun, want []string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("run failed: %v", r.err)
	}
	if !slices.Equal(sorted(want), sorted(r.rows)) {
		d := diff(want, r.rows)
		t.Fatalf("sink differs from kcat (%d rows, kcat %d): %s", len(r.rows), len(want), d)
	}
	var parts []int32
	for _, rg := range r.job.Resolution.Ranges {
		parts = append(parts, rg.Partition)
	}
	cps := commits(t, r.c, r.p.Group, "orders", parts...)
	for _, rg := range r.job.Resolution.Ranges {
		if got := cps[rg.Partition].Offset; got != rg.End {
			t.Errorf("partition %d committed at %d, want the range end %d", rg.Partition, got, rg.End)
		}
	}
}

// faultChunks is how many chunks of 100 orders TestFaults replays (two
// thirds of them lie in its window): 160 by default (40 under -race),
// REPLAY_FAULT_CHUNKS
// for a longer table (the figures in docs/testing.md use 1600).
func faultChunks(t *testing.T) int {
	v := os.Getenv("REPLAY_FAULT_CHUNKS")
	switch {
	case v == "" && raceEnabled:
		return 40 // the race detector makes each run about ten times slower
	case v == "":
		return 160
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		t.Fatalf("REPLAY_FAULT_CHUNKS=%q: want a number of chunks, at least 10", v)
	}
	return n
}

// TestFaults injects each retriable error kind, dropped connections and
// stalls into about 5% of the source side's requests (Fetch, ListOffsets,
// Metadata, FindCoordinator, OffsetCommit, OffsetFetch), then all of them at
// once (about 5% of the requests in all, every kind injected at least
// once): every run must end with exactly kcat's records in the
// sink, its commits at the ranges' ends, with no resume, and, in the
// measurement (REPLAY_FAULT_CHUNKS=1600 go test ./runner -run 'TestFaults$'
// -v, which prints the table docs/testing.md shows), within
// 3x the fault-free run's time.
func TestFaults(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb := newTestCluster(t, 4, "orders")
	chunks := faultChunks(t)
	measure := os.Getenv("REPLAY_FAULT_CHUNKS") != ""
	seedChunks(t, sb, chunks, 100)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, t0.Add(10*time.Minute), t0.Add(50*time.Minute))
	base := runFaultPlan(t, sb.Addr, dsn, "base", faultWindow)
	checkExact(t, base, want)
	t.Logf("fault-free: %s", base.elapsed)
	var cases [][]testenv.FaultKind
	for _, k := range testenv.AllFaultKinds {
		cases = append(cases, []testenv.FaultKind{k})
	}
	cases = append(cases, testenv.AllFaultKinds)
	table := []string{fmt.Sprintf("%d records, 4 partitions, PostgreSQL sink:", len(want)), "",
		"| fault kind (5% of requests) | injected | retries | run time | ratio to fault-free |", "|---|---|---|---|---|",
		fmt.Sprintf("| none | 0 | %d | %s | 1.00 |", base.retries, base.elapsed.Round(time.Millisecond))}
	for i, kinds := range cases {
		name := string(kinds[0])
		if len(kinds) > 1 {
			name = "all at once"
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			// About 5% of the requests fail: all at once, each request
			// draws from the six kinds that apply to it; each kind fails
			// at least its tenth request.
			cfg := testenv.FaultsConfig{Rate: 0.05, Kinds: kinds, Stall: faultStall, Seed: uint64(i + 1), EachKind: 10}
			if len(kinds) > 1 {
				cfg.Rate /= 6
			}
			f := testenv.NewFaults(sb.Cluster, cfg)
			r := runFaultPlan(t, sb.Addr, dsn, fmt.Sprintf("k%d", i), faultWindow)
			n := f.Injected()
			var missing []string
			for _, k := range kinds {
				if f.InjectedKind(k) == 0 {
					missing = append(missing, string(k))
				}
			}
			f.Stop()
			checkExact(t, r, want)
			ratio := float64(r.elapsed) / float64(base.elapsed)
			table = append(table, fmt.Sprintf("| %s | %d | %d | %s | %.2f |", name, n, r.retries, r.elapsed.Round(time.Millisecond), ratio))
			if len(missing) > 0 {
				t.Errorf("no fault of kind %s was injected", strings.Join(missing, ", "))
			}
			// Timing is asserted only in the measurement (REPLAY_FAULT_CHUNKS
			// set): the short default run on a shared machine is too noisy.
			if r.elapsed > 3*base.elapsed && measure {
				t.Errorf("run took %s, more than 3x the fault-free %s", r.elapsed, base.elapsed)
			}
		})
	}
	t.Log("\n" + strings.Join(table, "\n"))
}

// TestFaultsBudgetSpent fails every fetch of partition 0 at or past offset
// 200 (the second fetch) with NOT_LEADER_OR_FOLLOWER: the run gives up once
// retry.max_elapsed is spent, naming the partition, the offset it reached
// and committed (200, not 0), the last error, and the resume hint.
func TestFaultsBudgetSpent(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb := newTestCluster(t, 1, "orders")
	seedChunks(t, sb, 20, 100)
	h := sb.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1,
		When: func(req kmsg.Request) bool {
			r := req.(*kmsg.FetchRequest)
			return len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 && r.Topics[0].Partitions[0].FetchOffset >= 200
		}})
	defer h.Remove()
	start := time.Now()
	r := runFaultPlan(t, sb.Addr, dsn, "budget", "window: {offsets: {0: {from: 0, to: 1000}}}\nretry: {max_elapsed: 1s}")
	var pe *PartitionError
	var re *source.RetryError
	if !errors.As(r.err, &pe) || !errors.As(r.err, &re) {
		t.Fatalf("want a *PartitionError wrapping a *source.RetryError, got %T: %v", r.err, r.err)
	}
	t.Logf("error after %s: %v (hint %q)", time.Since(start).Round(time.Millisecond), r.err, fault.HintOf(r.err))
	if pe.Partition != 0 || pe.Offset != 200 {
		t.Errorf("error names partition %d at offset %d, want 0 at 200", pe.Partition, pe.Offset)
	}
	if !strings.Contains(r.err.Error(), "NOT_LEADER") && !strings.Contains(r.err.Error(), "Not Leader") {
		t.Errorf("error does not name the last error: %v", r.err)
	}
	if fault.HintOf(r.err) != fault.HintResume {
		t.Errorf("hint %q, want %q", fault.HintOf(r.err), fault.HintResume)
	}
	if cp := commits(t, r.c, r.p.Group, "orders", 0)[0]; cp.Offset != 200 {
		t.Errorf("committed %d, want 200", cp.Offset)
	}
	if re.Elapsed < time.Second || re.Elapsed > 3*time.Second {
		t.Errorf("gave up after %s, want about the 1s budget", re.Elapsed)
	}
}
