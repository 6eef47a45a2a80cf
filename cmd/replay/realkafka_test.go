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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
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
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "test-kafka"))
	if err != nil {
		t.Fatal(err)
	}
	return exec.CommandContext(ctx, script, append([]string{"tool", name}, args...)...)
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
// byte for byte), and Kafka's own kafka-consumer-groups shows the replay
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
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%02d", i)), Value: []byte(fmt.Sprintf("v%d-%d", i, r))})
		}
		k.Produce(t, "compacted", recs...)
		produced += len(recs)
		time.Sleep(300 * time.Millisecond) // segment.ms passes: the next round rolls a segment
	}
	// The cleaner compacts every segment but the active one.
	var kc []testenv.KcatRecord
	testenv.Eventually(t, 90*time.Second, 500*time.Millisecond, func() bool {
		kc = testenv.KcatRecords(t, k.Addr, "compacted", -1)
		return len(kc) < produced-keys
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
	holes := 0
	for _, g := range got {
		w, ok := want[fmt.Sprintf("%d/%d", g.Partition, g.Offset)]
		if !ok {
			t.Errorf("replay wrote %d/%d, which kcat does not read (removed by the cleaner?)", g.Partition, g.Offset)
			continue
		}
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Time.UnixMilli() != w.Timestamp {
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
	t.Logf("%d records produced, %d left by the cleaner (%d offsets removed); replay wrote the %d", produced, len(kc), holes, len(got))

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
