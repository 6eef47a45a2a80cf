package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// The tests of this file need Apache Kafka itself (REPLAY_TEST_KAFKA_BROKERS,
// scripts/test-kafka): what they check, kfake does not have (a log
// cleaner, KIP-848's consumer protocol) or the cross-check is Kafka's own
// tools.

// realKafka returns the real cluster, or skips t when the tests run on
// kfake.
func realKafka(t *testing.T, opts ...testenv.KafkaOption) *testenv.Kafka {
	t.Helper()
	if testenv.RealBrokers() == nil {
		t.Skipf("needs Apache Kafka: set %s (scripts/test-kafka up)", testenv.KafkaBrokersEnv)
	}
	return testenv.NewKafka(t, opts...)
}

// kafkaTool returns one of Kafka's own command-line tools, from the jars
// the test broker runs (scripts/test-kafka tool NAME ARGS).
func kafkaTool(t *testing.T, ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	return kafkaScript(t, ctx, append([]string{"tool", name}, args...)...)
}

// offsetsPlan writes a plan that reads every partition of topic from the
// earliest offset to the latest one, into a file sink.
func offsetsPlan(t *testing.T, dir, name, addr, topic, group string, partitions int, out string) string {
	t.Helper()
	var parts []string
	for p := range partitions {
		parts = append(parts, fmt.Sprintf("%d: {from: earliest, to: latest}", p))
	}
	body := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topic: %s}
group: %s
window: {offsets: {%s}}
throttle: {records_per_second: 100000}
sink: %s
`, name, addr, topic, group, strings.Join(parts, ", "), fileSink(out, 100))
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRealLogCleaner: on a compacted topic the broker's log cleaner has
// removed the older records of each key, leaving holes in the offsets; a
// run reads exactly what is left (kcat's records, offset, key and value
// byte for byte, tombstones with their null value), and Kafka's own kafka-consumer-groups shows the replay
// group at the log end.
func TestRealLogCleaner(t *testing.T) {
	k := realKafka(t)
	k.CreateTopic(t, "compacted", 2, map[string]string{
		"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0", "delete.retention.ms": "0",
	})
	const keys, rounds = 20, 8
	produced := 0
	for r := range rounds {
		var recs []*kgo.Record
		for i := range keys {
			rec := &kgo.Record{Key: []byte(fmt.Sprintf("k%02d", i)), Value: []byte(fmt.Sprintf("v%d-%d", i, r))}
			if (r == rounds-3 && i >= 10 && i < 13) || (r == rounds-1 && i < 5) {
				rec.Value = nil // a tombstone: removed by a later one, or the last of its key
			}
			recs = append(recs, rec)
		}
		k.Produce(t, "compacted", recs...)
		produced += len(recs)
		// Kept: the broker rolls a segment on the first append after
		// segment.ms has passed on its own clock; nothing shows the
		// time before.
		time.Sleep(300 * time.Millisecond)
	}
	// The cleaner compacts every segment but the active one; with no
	// record appended, what it left stays as it is.
	var kc, prev []testenv.KcatRecord
	testenv.Eventually(t, 90*time.Second, time.Second, func() bool {
		prev, kc = kc, testenv.KcatRecords(t, k.Addr, "compacted", -1)
		return len(kc) < produced-keys && len(kc) == len(prev)
	}, func() string { return fmt.Sprintf("the log cleaner left %d of %d records", len(kc), produced) })

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := offsetsPlan(t, dir, "cleaned", k.Addr, "compacted", "replay.cleaned", 2, out)
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	got := sinktest.DecodeLines(t, readFile(t, out))
	want := map[string]testenv.KcatRecord{}
	last := map[int32]int64{}
	for _, r := range kc {
		want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
		last[r.Partition] = max(last[r.Partition], r.Offset)
	}
	if len(got) != len(kc) {
		t.Fatalf("replay wrote %d records, kcat reads %d", len(got), len(kc))
	}
	holes, tombstones := 0, 0
	for _, g := range got {
		w, ok := want[fmt.Sprintf("%d/%d", g.Partition, g.Offset)]
		if !ok {
			t.Errorf("replay wrote %d/%d, which kcat does not read (removed by the cleaner?)", g.Partition, g.Offset)
			continue
		}
		if w.Value == nil {
			tombstones++
		}
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) || g.Time.UnixMilli() != w.Timestamp {
			t.Errorf("%d/%d: replay wrote key %q value %q at %d; kcat reads %q %q at %d", g.Partition, g.Offset, g.Key, g.Value, g.Time.UnixMilli(), w.Key, w.Value, w.Timestamp)
		}
	}
	for p, l := range last {
		n := 0
		for _, r := range kc {
			if r.Partition == p {
				n++
			}
		}
		holes += int(l+1) - n
	}
	if holes == 0 {
		t.Fatalf("the topic has no hole in its offsets: the cleaner did not run, the test proves nothing")
	}
	if tombstones == 0 {
		t.Errorf("replay wrote no tombstone (null value): want the last round's")
	}
	t.Logf("%d records produced, %d left by the cleaner (%d offsets removed); replay wrote the %d, %d tombstones among them", produced, len(kc), holes, len(got), tombstones)

	// Kafka's own tool: the group is at the log end of each partition.
	outTool, err := kafkaTool(t, t.Context(), "consumer-groups", "--bootstrap-server", k.Addr, "--describe", "--group", "replay.cleaned").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-consumer-groups: %v\n%s", err, outTool)
	}
	seen := 0
	for _, l := range strings.Split(string(outTool), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[1] != "compacted" {
			continue
		}
		seen++
		if f[3] != f[4] || f[5] != "0" {
			t.Errorf("kafka-consumer-groups: partition %s at %s, log end %s, lag %s: want the group at the log end", f[2], f[3], f[4], f[5])
		}
	}
	if seen != 2 {
		t.Fatalf("kafka-consumer-groups lists %d partitions of compacted, want 2:\n%s", seen, outTool)
	}
}

// TestRealLiveGroupRefused: a group a consumer of Kafka's own (the console
// consumer) is a live member of is refused, of either group protocol: the
// classic one and KIP-848's consumer protocol, whose group Apache Kafka
// describes through DescribeGroups as Dead (GROUP_ID_NOT_FOUND) even while
// it has members. Nothing is written, and the group's offsets stay the
// consumer's.
func TestRealLiveGroupRefused(t *testing.T) {
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			k := realKafka(t, testenv.Topics("orders"))
			k.Seed(t, seedOf(200))
			group := "live-" + protocol
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			consumer := kafkaTool(t, ctx, "console-consumer", "--bootstrap-server", k.Addr, "--topic", "orders", "--group", group,
				"--consumer-property", "group.protocol="+protocol, "--from-beginning")
			consumer.Cancel = func() error { return consumer.Process.Signal(syscall.SIGTERM) }
			consumer.WaitDelay = 20 * time.Second
			var cout bytes.Buffer
			consumer.Stdout, consumer.Stderr = &cout, &cout
			if err := consumer.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				_ = consumer.Wait()
			}()
			// The console consumer commits as it goes: wait until it has.
			testenv.Eventually(t, 60*time.Second, 250*time.Millisecond, func() bool {
				return len(k.Committed(t, group, "orders")) > 0
			}, func() string { return "the console consumer did not commit; its output:\n" + cout.String() })
			before := k.Committed(t, group, "orders")

			dir := t.TempDir()
			out := filepath.Join(dir, "out.jsonl")
			file := offsetsPlan(t, dir, "live", k.Addr, "orders", group, 1, out)
			r := replay(t, "run", "--yes", file)
			if r.code != exitRefused || !strings.Contains(r.text(), "live consumer group") {
				t.Fatalf("a run into the live %s group: want exit %d, refused as a live consumer group; got %s", protocol, exitRefused, r)
			}
			if protocol == "consumer" && !strings.Contains(r.text(), "KIP-848") {
				t.Errorf("the refusal does not say the group is of the consumer protocol:\n%s", r.text())
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the refused run wrote %s", out)
			}
			after := k.Committed(t, group, "orders")
			for p, o := range after {
				if o.Metadata != before[p].Metadata && strings.Contains(o.Metadata, "replay") {
					t.Errorf("partition %d: the refused run committed %+v", p, o)
				}
			}
		})
	}
}

// seedOf is n order events stamped over the last hour, on topic orders.
func seedOf(n int) (s sandbox.Seed) {
	now := time.Now().UTC().Truncate(time.Second)
	s.Topic, s.N, s.From, s.To = "orders", n, now.Add(-time.Hour), now.Add(-time.Minute)
	return s
}

// testKafkaNodes returns the node numbers scripts/test-kafka runs for the
// real cluster the tests use, or skips t when the cluster is not one it
// started (a Docker container, a remote cluster): the restart tests kill
// and start its nodes.
func testKafkaNodes(t *testing.T, k *testenv.Kafka) []string {
	t.Helper()
	out, err := kafkaScript(t, t.Context(), "status").Output()
	if err != nil {
		t.Skipf("the real cluster was not started by scripts/test-kafka (status: %v): a restart test needs to kill its nodes", err)
	}
	var nodes []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && strings.HasPrefix(f[0], "node") && f[2] == "running" {
			for _, a := range k.Addrs {
				if a == f[1] {
					nodes = append(nodes, strings.TrimPrefix(f[0], "node"))
				}
			}
		}
	}
	if len(nodes) != len(k.Addrs) {
		t.Skipf("scripts/test-kafka runs %q, not the cluster %v the tests use", out, k.Addrs)
	}
	return nodes
}

// kafkaScript returns scripts/test-kafka with args.
func kafkaScript(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "test-kafka"))
	if err != nil {
		t.Fatal(err)
	}
	return exec.CommandContext(ctx, script, args...)
}

// restartTarget is one sink of TestRealBrokerRestart: its plan section,
// and the source coordinates ("partition/offset") it holds after the run,
// once per copy.
type restartTarget struct {
	name  string
	sink  func(t *testing.T, k *testenv.Kafka, dir string) string
	coord func(t *testing.T, k *testenv.Kafka, dir string) []string
}

var restartTargets = []restartTarget{
	{name: "file",
		sink: func(t *testing.T, k *testenv.Kafka, dir string) string {
			return fileSink(filepath.Join(dir, "out.jsonl"), 100)
		},
		coord: func(t *testing.T, k *testenv.Kafka, dir string) []string {
			var out []string
			for _, r := range sinktest.DecodeLines(t, readFile(t, filepath.Join(dir, "out.jsonl"))) {
				out = append(out, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
			}
			return out
		}},
	{name: "postgres",
		sink: func(t *testing.T, k *testenv.Kafka, dir string) string {
			dsn := testenv.Postgres(t)
			if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte(dsn), 0o600); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("{type: postgres, dsn: %q, table: restarted, create_table: true, batch_size: 100}", dsn)
		},
		coord: func(t *testing.T, k *testenv.Kafka, dir string) []string {
			return testenv.PgCoords(t, string(readFile(t, filepath.Join(dir, "dsn"))), "restarted")
		}},
	{name: "kafka_exactly_once",
		sink: func(t *testing.T, k *testenv.Kafka, dir string) string {
			k.CreateTopic(t, "orders-eos", 4, nil)
			return fmt.Sprintf("{type: kafka, brokers: [%q], topic: orders-eos, keep_partition: true, exactly_once: true, batch_size: 100}", k.Addr)
		},
		coord: func(t *testing.T, k *testenv.Kafka, dir string) []string {
			var out []string
			for _, r := range readCommitted(t, k, "orders-eos", kgo.ReadCommitted()) {
				prov := map[string]string{}
				for _, h := range r.Headers {
					prov[h.Key] = string(h.Value)
				}
				out = append(out, prov[kafkasink.HeaderSourcePartition]+"/"+prov[kafkasink.HeaderSourceOffset])
			}
			return out
		}},
}

// TestRealBrokerRestart: the broker is killed (SIGKILL of its JVM) during
// a run and started again seconds later; the run rides it out within
// retry.max_elapsed and finishes exactly, with no manual resume, for the
// file, PostgreSQL and exactly-once Kafka sinks: the sink holds kcat's
// records of the window once each and the replay group stands at the
// ranges' ends. REPLAY_RESTART_DOWN sets how long a broker stays down
// (default 6s). On a cluster of several nodes (scripts/test-kafka up
// --nodes 3) it is the rolling-restart soak: the nodes are killed and
// started one by one, each back in sync before the next, during one run.
func TestRealBrokerRestart(t *testing.T) {
	down := 6 * time.Second
	if v := os.Getenv("REPLAY_RESTART_DOWN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("REPLAY_RESTART_DOWN=%q: %v", v, err)
		}
		down = d
	}
	for _, target := range restartTargets {
		t.Run(target.name, func(t *testing.T) {
			k := realKafka(t, testenv.Topics("orders"), testenv.Partitions(4))
			nodes := testKafkaNodes(t, k)
			seed := seedOf(4000)
			k.Seed(t, seed)
			dir := t.TempDir()
			from, to := seed.From.Add(-time.Minute), seed.To.Add(time.Second)
			want := testenv.KcatCoords(t, k.Addr, "orders", -1, from, to)
			// One node: the run pauses while it is down. Several: they
			// restart one by one while the run goes on, which must last.
			rps := 400
			if len(nodes) > 1 {
				rps = int(float64(seed.N) / (time.Duration(len(nodes))*(down+15*time.Second) + 10*time.Second).Seconds())
			}
			planFile := writePlan(t, dir, planSpec{name: "restart", addr: k.Addr, from: from, to: to,
				recordsPerSecond: rps, sink: target.sink(t, k, dir)})
			p := startProcess(t, dir, "run", "--yes", planFile)
			adm := k.Admin(t)
			testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, func() bool {
				if p.exited() {
					t.Fatalf("the run ended before the broker was killed: exit %d\n%s", p.cmd.ProcessState.ExitCode(), p.stderr)
				}
				// The coordinator may still be loading: no answer yet.
				offs, err := adm.FetchOffsets(t.Context(), "replay.restart")
				if err != nil {
					return false
				}
				progressed := false
				offs.Each(func(o kadm.OffsetResponse) { progressed = progressed || (o.Err == nil && o.At > 0) })
				return progressed
			}, "the run's first commits")
			killed := time.Now()
			for _, n := range nodes {
				if out, err := kafkaScript(t, t.Context(), "kill", n).CombinedOutput(); err != nil {
					t.Fatalf("kill node %s: %v\n%s", n, err, out)
				}
				time.Sleep(down) // kept: the outage under test is this long in wall time
				if out, err := kafkaScript(t, t.Context(), "start", n).CombinedOutput(); err != nil {
					t.Fatalf("start node %s: %v\n%s", n, err, out)
				}
				if len(nodes) > 1 {
					waitInSync(t, k, "orders", len(nodes))
				}
			}
			select {
			case <-p.done:
			case <-time.After(3 * time.Minute):
				t.Fatalf("the run did not finish 3 minutes after the broker came back:\n%s", p.stderr)
			}
			r := result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
			if r.code != exitOK {
				t.Fatalf("the run with the broker down for %s: %s", down, r)
			}
			retries := strings.Count(r.stderr, "retrying")
			t.Logf("broker down %s; the run finished %s after the kill, %d retries logged", down, time.Since(killed).Round(time.Millisecond), retries)
			if msg := onceProblem(target.coord(t, k, dir), want); msg != "" {
				t.Errorf("the sink holds %s\nthe run's log:\n%s", msg, r.stderr)
			}
			checkGroupAtEnds(t, planFile) // its 4 partitions (eosPartitions)
		})
	}
}

// TestReal1000Partitions: a time window over a topic of 1000 partitions (a
// few records each, stamped inside and outside the window) on Apache
// Kafka: the file holds kcat's records of the window once each, and the
// group commits every partition at its range end.
func TestReal1000Partitions(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 partitions")
	}
	const partitions = 1000
	k := realKafka(t)
	k.CreateTopic(t, "wide", partitions, nil)
	now := time.Now().UTC().Truncate(time.Second)
	from, to := now.Add(-time.Hour), now.Add(-time.Minute)
	var recs []*kgo.Record
	for p := range int32(partitions) {
		for i, ts := range []time.Time{from.Add(-time.Minute), from.Add(time.Duration(p) * time.Second), to.Add(-time.Second), to.Add(30 * time.Second)} {
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d-%d", p, i)), Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)), Timestamp: ts})
		}
	}
	k.Produce(t, "wide", recs...)
	want := testenv.KcatCoords(t, k.Addr, "wide", -1, from, to)
	if len(want) != 2*partitions {
		t.Fatalf("kcat reads %d records in the window, want %d", len(want), 2*partitions)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "wide", addr: k.Addr, topic: "wide", from: from, to: to, recordsPerSecond: 100000, sink: fileSink(out, 500)})
	start := time.Now()
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	t.Logf("%d partitions, %d records in the window: %s", partitions, len(want), time.Since(start).Round(time.Millisecond))
	seen := map[string]int{}
	for _, r := range sinktest.DecodeLines(t, readFile(t, out)) {
		seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
	}
	for _, c := range want {
		if seen[c] != 1 {
			t.Errorf("%s written %d times, want once", c, seen[c])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct records written, kcat reads %d in the window", len(seen), len(want))
	}
	for p, cp := range checkpoints(t, file, partitions) {
		if !cp.Replay || cp.Offset != cp.End {
			t.Errorf("partition %d: committed %d, range [%d, %d); want the end", p, cp.Offset, cp.Start, cp.End)
		}
	}
}

// waitInSync waits until every partition of topic has n replicas in sync
// (a restarted node caught up).
func waitInSync(t *testing.T, k *testenv.Kafka, topic string, n int) {
	t.Helper()
	adm := k.Admin(t)
	testenv.Eventually(t, 2*time.Minute, 500*time.Millisecond, func() bool {
		td, err := adm.ListTopics(t.Context(), topic)
		if err != nil {
			return false
		}
		d, ok := td[topic]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return false
		}
		for _, p := range d.Partitions {
			if len(p.ISR) < n {
				return false
			}
		}
		return true
	}, "every partition of %s with %d replicas in sync", topic, n)
}

// TestRealAbortsHangingTransaction: a transaction of the sink's own
// transactional id left open on the target partition, which its
// coordinator does not know of (a hanging transaction: Apache Kafka 4 can
// leave one when a broker is killed during a transaction; here it is made
// with the brokers' partition verification off and a Produce of the
// version before KIP-890), holds the partition's last stable offset, so a
// read_committed consumer would never see what the run writes. The run
// aborts it (WriteTxnMarkers, KIP-664), says so, and its records are read
// committed, each once.
func TestRealAbortsHangingTransaction(t *testing.T) {
	k := realKafka(t, testenv.Topics("orders"))
	k.Seed(t, seedOf(300))
	k.CreateTopic(t, "orders-eos", 1, nil)
	k.NoPartitionVerification(t)

	// The sink's transactional id of source partition 0 (prefix-partition).
	txn := k.Client(t, kgo.TransactionalID("hangtest-0"))
	pid, epoch, err := txn.ProducerID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	txn.Close()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	raw := testenv.SealBatch(kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, FirstTimestamp: time.Now().UnixMilli(),
		MaxTimestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, FirstSequence: 0, NumRecords: 1,
		Records: testenv.AppendRecord(nil, kmsg.Record{Key: []byte("hanging"), Value: []byte("never committed")})})
	id := "hangtest-0"
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders-eos"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), k.Client(t, kgo.MaxVersions(vs)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("produce the hanging transaction's batch: %v", err)
	}
	hanging := func() int { return k.OpenTransactions(t, "orders-eos", pid) }
	if hanging() != 1 {
		t.Fatal("no hanging transaction was made: the test proves nothing")
	}

	dir := t.TempDir()
	seed := seedOf(300)
	planFile := writePlan(t, dir, planSpec{name: "hang", addr: k.Addr, from: seed.From.Add(-time.Minute), to: seed.To.Add(time.Second), recordsPerSecond: 100000,
		sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: orders-eos, keep_partition: true, exactly_once: true, transactional_id: hangtest, batch_size: 100}", k.Addr)})
	r := replayProcess(t, dir, "run", "--yes", planFile)
	if r.code != exitOK || !strings.Contains(r.stderr, "hanging") {
		t.Fatalf("the run over a hanging transaction: want exit 0 saying it aborted it, got %s", r)
	}
	if n := hanging(); n != 0 {
		t.Errorf("%d hanging transactions left", n)
	}
	want := testenv.KcatCoords(t, k.Addr, "orders", -1, seed.From.Add(-time.Minute), seed.To.Add(time.Second))
	got := map[string]int{}
	for _, rec := range readCommitted(t, k, "orders-eos", kgo.ReadCommitted()) {
		prov := map[string]string{}
		for _, h := range rec.Headers {
			prov[h.Key] = string(h.Value)
		}
		got[prov[kafkasink.HeaderSourcePartition]+"/"+prov[kafkasink.HeaderSourceOffset]]++
	}
	for _, c := range want {
		if got[c] != 1 {
			t.Errorf("%s read committed %d times, want once", c, got[c])
		}
	}
	if len(got) != len(want) {
		t.Errorf("read committed %d records, want kcat's %d", len(got), len(want))
	}
}

// abbreviate joins the first n of list, and says how many more there are.
func abbreviate(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, " ")
	}
	return strings.Join(list[:n], " ") + fmt.Sprintf(" … and %d more", len(list)-n)
}
