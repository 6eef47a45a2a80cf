package runner

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/registry"
)

// groupKeys are the requests of the hold's membership and of the group
// checks and commits of a plain run.
var groupKeys = []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup}

// heldRun is one run of the fault tests' plan under a hold, as every
// plain run of the command line is.
type heldRun struct {
	faultRun
	log     *testenv.Buffer
	retried int // "retrying" warnings in the log
	left    bool
}

// runHeldFaultPlan is runFaultPlan under a hold on the plan's group, with
// the run's log kept, throttled so that the run lasts a few of the hold's
// heartbeats; after the run, the hold is released and left says
// whether the group was empty within 3 s (the LeaveGroup went through, not
// the session timeout).
func runHeldFaultPlan(t *testing.T, addr, dsn, name, extra string) heldRun {
	t.Helper()
	table := "faults_" + strings.NewReplacer("-", "_", "/", "_").Replace(strings.ToLower(name))
	p := testPlanAt(t, addr, fmt.Sprintf(`
version: 1
name: faults
source: {brokers: ["%s"], topic: orders}
group: replay.%s
%s
sink: {type: postgres, dsn: "%s", table: %s, create_table: true, batch_size: 500}
throttle: {records_per_second: 500}
`, addr, table, extra, dsn, table))
	c, err := Connect(t.Context(), p.Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rp := faultRetry
	rp.MaxElapsed = time.Duration(p.Retry.MaxElapsed)
	c.SetRetry(rp) // the hold's calls, before Prepare applies the plan's
	buf := &testenv.Buffer{}
	opts := testOptions(t)
	opts.Log = zerolog.New(zerolog.MultiLevelWriter(buf, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	opts.SourceRetry = faultRetry
	r := heldRun{log: buf}
	r.c, r.p = c, p
	start := time.Now()
	before := c.Retries()
	hold, err := HoldGroup(t.Context(), c, p)
	if err != nil {
		r.err = err
		return r
	}
	opts.Hold = hold
	r.job, r.err = Prepare(t.Context(), c, p, opts)
	if r.err == nil {
		var s sinks.Sink
		if s, err = registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: r.job.RunID()}); err != nil {
			t.Fatal(err)
		}
		var rep *Report
		rep, r.err = r.job.Run(t.Context(), s)
		s.Close()
		// The hold keeps heartbeating until Release: a retry of one
		// between the report and this read is the cluster's, not the
		// run's. The report never counts more than the cluster.
		if got := c.Retries(); rep != nil && r.err == nil && (rep.SourceRetries > got || got-rep.SourceRetries > 2) {
			t.Errorf("the report counts %d source retries, the cluster %d", rep.SourceRetries, got)
		}
	}
	hold.Release()
	r.elapsed, r.retries = time.Since(start), c.Retries()-before
	r.retried = strings.Count(buf.String(), "retriable error, retrying")
	leaveCtx, cancelLeave := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancelLeave()
	_ = testenv.WaitFor(leaveCtx, 20*time.Millisecond, func() bool {
		g, err := c.DescribeGroup(t.Context(), p.Group)
		r.left = err == nil && g != nil && len(g.Members) == 0
		return r.left
	})
	if r.err == nil {
		r.rows = testenv.PgCoords(t, dsn, plan.ConfigOf[postgres.Section](&r.p.Sink).Table)
	}
	return r
}

// TestGroupFaults injects each fault of the coordinator into the group
// path of a plain run (the hold's JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup, the group checks' OffsetFetch and FindCoordinator, the
// member's OffsetCommits: the pin, the batches, the confirmation), the
// first request of every kind failing and about 5% of the others: every
// run must end exact (kcat's records once, commits at the ends) with no
// resume, its retries counted in the report and logged, and the hold
// released at once. Before, one such answer to a member commit ended the
// run with a false "the group rebalanced", and a failed heartbeat with
// "lost its hold".
func TestGroupFaults(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb := newTestCluster(t, 4, "orders")
	seedChunks(t, sb, 20, 100)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, t0.Add(10*time.Minute), t0.Add(50*time.Minute))
	for i, k := range []testenv.FaultKind{testenv.FaultNotCoordinator, testenv.FaultLoadInProgress, testenv.FaultCoordinatorNotAvail,
		testenv.FaultRequestTimedOut, testenv.FaultDrop, testenv.FaultStall} {
		t.Run(strings.ReplaceAll(string(k), " ", "_"), func(t *testing.T) {
			f := testenv.NewFaults(sb.Cluster, testenv.FaultsConfig{Rate: 0.05, Kinds: []testenv.FaultKind{k}, Stall: faultStall,
				Seed: uint64(i + 1), EachKind: 1, EachKey: true, Keys: groupKeys})
			r := runHeldFaultPlan(t, sb.Addr, dsn, fmt.Sprintf("g%d", i), faultWindow)
			f.Stop()
			checkExact(t, r.faultRun, want)
			var hit []string
			for _, key := range groupKeys {
				if n := f.InjectedKey(key); n > 0 {
					hit = append(hit, fmt.Sprintf("%s %d", kmsg.NameForKey(int16(key)), n))
				}
			}
			t.Logf("%s: %d faults (%s), %d retries, %d logged, %s", k, f.Injected(), strings.Join(hit, ", "), r.retries, r.retried, r.elapsed.Round(time.Millisecond))
			for _, key := range []kmsg.Key{kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup} {
				if k == testenv.FaultRequestTimedOut && key != kmsg.OffsetCommit {
					continue // a broker answers only commits so
				}
				if f.InjectedKey(key) == 0 {
					t.Errorf("no fault was injected into %s", kmsg.NameForKey(int16(key)))
				}
			}
			if r.retries == 0 || r.retried == 0 {
				t.Errorf("%d retries counted, %d logged: want both", r.retries, r.retried)
			}
			if !r.left {
				t.Error("the hold's member was still in the group 3 s after Release")
			}
		})
	}
}

// groupFaultRuns is how many runs TestGroupFaultsLoop makes: 3 by default
// (2 under -race), REPLAY_GROUP_FAULT_RUNS for a longer loop, e.g.
// REPLAY_GROUP_FAULT_RUNS=50 go test ./runner -run 'TestGroupFaultsLoop$' -v
// (which prints the table of runs, faults, retries and run times).
func groupFaultRuns(t *testing.T) int {
	v := os.Getenv("REPLAY_GROUP_FAULT_RUNS")
	switch {
	case v == "" && raceEnabled:
		return 2
	case v == "":
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("REPLAY_GROUP_FAULT_RUNS=%q: want a number of runs", v)
	}
	return n
}

// TestGroupFaultsLoop runs the plan again and again under a hold, each run
// into a new table and group, with about 5% of the requests on every API
// failing (every kind at once: the retriable codes, dropped connections,
// stalls; the group APIs included): every run must be exact with no
// manual resume. Before, 4 of 4 such runs died.
func TestGroupFaultsLoop(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb := newTestCluster(t, 4, "orders")
	seedChunks(t, sb, 20, 100)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, t0.Add(10*time.Minute), t0.Add(50*time.Minute))
	n := groupFaultRuns(t)
	table := []string{"| run | faults | retries | run time |", "|---|---|---|---|"}
	exact := 0
	for i := range n {
		// Each request draws from the kinds that apply to it (up to six).
		f := testenv.NewFaults(sb.Cluster, testenv.FaultsConfig{Rate: 0.05 / 6, Kinds: testenv.AllFaultKinds, Stall: faultStall, Seed: uint64(100 + i)})
		r := runHeldFaultPlan(t, sb.Addr, dsn, fmt.Sprintf("loop%d", i), faultWindow)
		f.Stop()
		table = append(table, fmt.Sprintf("| %d | %d | %d | %s |", i, f.Injected(), r.retries, r.elapsed.Round(time.Millisecond)))
		if !t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) { checkExact(t, r.faultRun, want) }) {
			continue
		}
		exact++
	}
	t.Logf("%d of %d runs exact\n%s", exact, n, strings.Join(table, "\n"))
}

// A dropped or slow first Metadata request, after the probe reached the
// broker, is retried: Connect succeeds. Before, the drop failed with a
// SASL hint and the stall with "is it a Kafka broker port?".
func TestConnectRidesOutMetadataFaults(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	for _, k := range []testenv.FaultKind{testenv.FaultDrop, testenv.FaultStall} {
		t.Run(string(k), func(t *testing.T) {
			f := testenv.NewFaults(sb.Cluster, testenv.FaultsConfig{Kinds: []testenv.FaultKind{k}, Stall: 3 * time.Second, EachKind: 1, Keys: []kmsg.Key{kmsg.Metadata}})
			defer f.Stop()
			c, err := Connect(t.Context(), plan.Source{Brokers: []string{sb.Addr}, Topic: "orders"}, WithProbeTimeout(6*time.Second))
			if err != nil {
				t.Fatalf("connect with the first Metadata request faulted (%s): %v", k, err)
			}
			c.Close()
			if f.InjectedKind(k) == 0 {
				t.Fatal("no fault was injected")
			}
			if _, err := source.Connect(t.Context(), plan.Source{Brokers: []string{sb.Addr}, Topic: "orders"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
