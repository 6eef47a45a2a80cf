package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/registry"
)

// sinkFaultRuns is how many runs per sink TestSinkFaultsLoop makes: 2 by
// default (1 under -race), REPLAY_FAULT_RUNS for a longer loop, e.g.
// REPLAY_FAULT_RUNS=20 go test ./runner -run 'TestSinkFaultsLoop$' -v
// (which prints, per sink, the faults by API, the retries and the run
// times against a fault-free run).
func sinkFaultRuns(t *testing.T) int {
	v := os.Getenv("REPLAY_FAULT_RUNS")
	switch {
	case v == "" && raceEnabled:
		return 1
	case v == "":
		return 2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("REPLAY_FAULT_RUNS=%q: want a number of runs", v)
	}
	return n
}

// faultAPIs are the requests TestSinkFaultsLoop counts faults of: the
// source side's, the group's and the transactional producer's.
var faultAPIs = slices.Concat([]kmsg.Key{kmsg.Metadata, kmsg.ListOffsets, kmsg.Fetch}, testenv.GroupKeys(), testenv.TxnKeys())

// sinkRun is one run of TestSinkFaultsLoop.
type sinkRun struct {
	faultRun
	sinkRetries int64
}

// sinkFaultTarget is one sink of TestSinkFaultsLoop: what run name needs
// made before the faults start (create, optional), the plan's sink section,
// what it holds after the run ("partition/offset" of each source record,
// once per copy), and whether the run holds the group as a plain run of
// the command line does (not with an exactly-once kafka sink, whose
// transactions commit the group's offsets).
type sinkFaultTarget struct {
	name   string
	create func(t *testing.T, name string)
	sink   func(name string) string
	read   func(t *testing.T, name string) []string
	held   bool
}

// runSinkFaultPlan runs the window of orders into target's sink for run
// name, under the group replay.<name>, opening the sink as the command
// line does; the run's source and sink retries are counted.
func runSinkFaultPlan(t *testing.T, sb *sandbox.Sandbox, target sinkFaultTarget, name string) (r sinkRun) {
	t.Helper()
	p := testPlanAt(t, sb.Addr, fmt.Sprintf(`
version: 1
name: faults
source: {brokers: ["%s"], topic: orders}
group: replay.%s
%s
sink: %s
throttle: {records_per_second: 10000}
`, sb.Addr, name, faultWindow, target.sink(name)))
	c, err := Connect(t.Context(), p.Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rp := faultRetry
	rp.MaxElapsed = time.Duration(p.Retry.MaxElapsed)
	c.SetRetry(rp)
	opts := testOptions(t)
	opts.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	opts.SourceRetry = faultRetry
	r.c, r.p = c, p
	start := time.Now()
	before := c.Retries()
	defer func() { r.elapsed, r.retries = time.Since(start), c.Retries()-before }()
	if target.held {
		hold, err := HoldGroup(t.Context(), c, p)
		if err != nil {
			r.err = err
			return r
		}
		defer hold.Release()
		opts.Hold = hold
	}
	if r.job, r.err = Prepare(t.Context(), c, p, opts); r.err != nil {
		return r
	}
	var parts []int32
	for _, rg := range r.job.Resolution.Ranges {
		parts = append(parts, rg.Partition)
	}
	s, err := registry.New(t.Context(), p.Sink, sinks.Options{Log: opts.Log, PlanName: p.Name, RunID: r.job.RunID(), Group: p.Group,
		Fingerprint: r.job.Resolution.Fingerprint, Topic: r.job.Resolution.Topic, Partitions: parts,
		CommitMetadata: r.job.CommitMetadata, SourceClusterID: r.job.SourceClusterID()})
	if err != nil {
		r.err = fmt.Errorf("open the sink: %w", err)
		return r
	}
	defer s.Close()
	rep, err := r.job.Run(t.Context(), s)
	r.err = err
	if rep != nil {
		r.sinkRetries = rep.SinkRetries
	}
	return r
}

// readCommittedCoords returns the source coordinates (the provenance
// headers) of every record of topic that a read_committed consumer reads.
// It reads the transaction markers too, to reach each partition's end.
func readCommittedCoords(t *testing.T, addr, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []string
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the read_committed read of %s did not reach the partitions' ends (left: %v): a transaction left open?", topic, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			prov := map[string]string{}
			for _, h := range r.Headers {
				prov[h.Key] = string(h.Value)
			}
			out = append(out, prov[kafkasink.HeaderSourcePartition]+"/"+prov[kafkasink.HeaderSourceOffset])
		})
	}
	return out
}

// TestSinkFaultsLoop runs the plan again and again into each sink (the
// exactly-once kafka sink on the source cluster, the file sink,
// PostgreSQL), each run with a group and output of its own, with about 5%
// of the requests on every API failing (every kind at once: the
// retriable codes, CONCURRENT_TRANSACTIONS, dropped connections, stalls;
// the group and transaction APIs and Produce included): every run must be
// exact with no manual resume: the sink holds kcat's records of the window
// once each (the kafka target read read_committed), and the replay
// group's commits stand at the ranges' ends. Before, a dropped
// InitProducerID failed the exactly-once run with a SASL hint.
func TestSinkFaultsLoop(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb := newTestCluster(t, 4, "orders")
	seedChunks(t, sb, 20, 100)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, t0.Add(10*time.Minute), t0.Add(50*time.Minute))
	dir := t.TempDir()
	targets := []sinkFaultTarget{
		{name: "kafka exactly once", create: func(t *testing.T, name string) {
			if err := sb.CreateTopic(name, 4, nil); err != nil {
				t.Fatal(err)
			}
		}, sink: func(name string) string {
			return fmt.Sprintf("{type: kafka, brokers: [%q], topic: %s, keep_partition: true, exactly_once: true, batch_size: 50}", sb.Addr, name)
		}, read: func(t *testing.T, name string) []string { return readCommittedCoords(t, sb.Addr, name) }},
		{name: "file", held: true, sink: func(name string) string {
			return fmt.Sprintf("{type: file, path: %s, batch_size: 50}", filepath.Join(dir, name+".jsonl"))
		}, read: func(t *testing.T, name string) []string { return readCoords(t, filepath.Join(dir, name+".jsonl")) }},
		{name: "postgres", held: true, sink: func(name string) string {
			return fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 50}", dsn, name)
		}, read: func(t *testing.T, name string) []string { return testenv.PgCoords(t, dsn, name) }},
	}
	n := sinkFaultRuns(t)
	var tables []string
	for ti, target := range targets {
		t.Run(strings.ReplaceAll(target.name, " ", "_"), func(t *testing.T) {
			run := func(i int, faults *testenv.FaultsConfig) (sinkRun, *testenv.Faults) {
				name := fmt.Sprintf("sinkfaults_%d_%d", ti, i)
				if i < 0 {
					name = fmt.Sprintf("sinkfaults_%d_base", ti)
				}
				if target.create != nil {
					target.create(t, name)
				}
				var f *testenv.Faults
				if faults != nil {
					f = testenv.NewFaults(sb.Cluster, *faults)
				}
				r := runSinkFaultPlan(t, sb, target, name)
				if f != nil {
					f.Stop()
				}
				if r.err == nil {
					r.rows = target.read(t, name)
				}
				return r, f
			}
			base, _ := run(-1, nil)
			checkExact(t, base.faultRun, want)
			byAPI := map[kmsg.Key]int64{}
			rows := []string{"| run | faults | source retries | sink retries | run time | extra vs fault-free |", "|---|---|---|---|---|---|",
				fmt.Sprintf("| fault-free | 0 | %d | %d | %s | |", base.retries, base.sinkRetries, base.elapsed.Round(time.Millisecond))}
			exact := 0
			var injected, srcRetries, sinkRetries int64
			var extra time.Duration
			for i := range n {
				// Each request draws from the kinds that apply to it (up to six).
				cfg := testenv.FaultsConfig{Rate: 0.05 / 6, Kinds: testenv.EveryFaultKind, Stall: faultStall, Seed: uint64(1000*ti + i + 1)}
				if i == 0 && target.name == "kafka exactly once" {
					// The first run fails the producers' start and the
					// transaction APIs at least once each, which 5% of a
					// few requests may miss.
					cfg.EachKind, cfg.EachKey, cfg.Keys = 2, true, testenv.TxnKeys()
				}
				r, f := run(i, &cfg)
				for _, key := range faultAPIs {
					byAPI[key] += f.InjectedKey(key)
				}
				injected, srcRetries, sinkRetries, extra = injected+f.Injected(), srcRetries+r.retries, sinkRetries+r.sinkRetries, extra+r.elapsed-base.elapsed
				rows = append(rows, fmt.Sprintf("| %d | %d | %d | %d | %s | %+.0f%% |", i, f.Injected(), r.retries, r.sinkRetries,
					r.elapsed.Round(time.Millisecond), 100*float64(r.elapsed-base.elapsed)/float64(base.elapsed)))
				if t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) { checkExact(t, r.faultRun, want) }) {
					exact++
				}
			}
			var apis []string
			for _, key := range faultAPIs {
				if byAPI[key] > 0 {
					apis = append(apis, fmt.Sprintf("%s %d", kmsg.NameForKey(int16(key)), byAPI[key]))
				}
			}
			summary := fmt.Sprintf("%s: %d of %d runs exact, %d records each; %d faults (%s); %d source and %d sink retries; mean extra time %s over the fault-free %s",
				target.name, exact, n, len(want), injected, strings.Join(apis, ", "), srcRetries, sinkRetries,
				(extra / time.Duration(n)).Round(time.Millisecond), base.elapsed.Round(time.Millisecond))
			tables = append(tables, summary+"\n\n"+strings.Join(rows, "\n"))
			if target.name == "kafka exactly once" {
				for _, key := range []kmsg.Key{kmsg.InitProducerID, kmsg.Produce, kmsg.EndTxn} {
					if byAPI[key] == 0 {
						t.Errorf("no fault was injected into %s in %d runs", kmsg.NameForKey(int16(key)), n)
					}
				}
			}
		})
	}
	t.Log("\n" + strings.Join(tables, "\n\n"))
}
