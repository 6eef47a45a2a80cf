//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
)

// topicsMemoryLimitMiB is the peak RSS a `replay run` of a plan of
// several topics stays within.
const topicsMemoryLimitMiB = 64

// TestTopicsMemory: a plan of 3 topics of 200 partitions each, 30,000
// records of about 200 bytes per topic, replayed by `replay run` as a
// child process into one file per topic, stays within a peak RSS
// (VmHWM, see benchSampleHWM) of topicsMemoryLimitMiB; each topic's file
// holds kcat's window of that topic once. The broker is not counted: kfake
// runs in the test process, Apache Kafka in its own. Under the race
// detector the child is a race build, whose shadow memory is not replay's:
// the figure is logged, not checked.
func TestTopicsMemory(t *testing.T) {
	const (
		partitions = 200
		perTopic   = 30_000
		batch      = 15_000 // records per ProduceSync
	)
	topics := []string{"mem-a", "mem-b", "mem-c"}
	k := testenv.NewKafka(t, testenv.Topics(topics...), testenv.Partitions(partitions))
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(2*batch))

	// One record in each partition of each topic before the window and one
	// after it; the window [from, to) is of whole seconds and its records
	// carry the producer's clock.
	produce := func(recs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	edge := func(v string) time.Time {
		t.Helper()
		var recs []*kgo.Record
		for _, topic := range topics {
			for p := range int32(partitions) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
			}
		}
		produce(recs)
		next := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
		return next.UTC()
	}
	from := edge(`{"early":true}`)
	pad := strings.Repeat("x", 160)
	start := time.Now()
	for _, topic := range topics {
		recs := make([]*kgo.Record, 0, batch)
		for i := range perTopic {
			recs = append(recs, &kgo.Record{
				Topic:     topic,
				Partition: int32(i % partitions),
				Key:       fmt.Appendf(nil, "k%d", i),
				Value:     fmt.Appendf(nil, `{"topic":%q,"n":%d,"pad":%q}`, topic, i, pad),
			})
			if len(recs) == batch {
				produce(recs)
				recs = recs[:0]
			}
		}
		if len(recs) > 0 {
			produce(recs)
		}
	}
	t.Logf("produced %d records in %s", len(topics)*perTopic, time.Since(start).Round(time.Millisecond))
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next)) // kept: the window's bounds are whole seconds
	to := next.UTC()
	edge(`{"late":true}`)

	dir := t.TempDir()
	planFile := filepath.Join(dir, "topics-mem.yaml")
	body := fmt.Sprintf(`version: 1
name: topics-mem
source: {brokers: [%q], topics: [%s]}
group: replay.topics-mem
window: {from: %s, to: %s}
sink: %s
`, k.Addr, strings.Join(topics, ", "), from.Format(time.RFC3339), to.Format(time.RFC3339), fileSink(filepath.Join(dir, "out-{topic}.jsonl"), 1000))
	if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	p := startProcess(t, dir, "run", "--yes", "--log-level", "warn", planFile)
	stop := make(chan struct{})
	sampled := make(chan int64)
	go func() { sampled <- benchSampleHWM(p.cmd.Process.Pid, stop) }()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		close(stop)
		<-sampled
		t.Fatalf("replay run did not finish in 3 minutes:\n%s", p.stderr.String())
	}
	close(stop)
	peak := float64(<-sampled) / 1024
	elapsed := time.Since(start)
	r := p.result()
	if r.code != exitOK {
		t.Fatalf("replay run: %s", r)
	}

	total := 0
	for _, topic := range topics {
		want := testenv.KcatCoords(t, k.Addr, topic, -1, from, to)
		if len(want) != perTopic {
			t.Fatalf("kcat reads %d records of topic %s in the window, want %d: the topics were not seeded as meant", len(want), topic, perTopic)
		}
		checkOnce(t, "topic "+topic+"'s file", fileCoords(t, filepath.Join(dir, "out-"+topic+".jsonl")), want)
		total += len(want)
	}

	t.Logf("peak RSS %.1f MiB for %d topics x %d partitions, %d records (replay run took %s)",
		peak, len(topics), partitions, total, elapsed.Round(time.Millisecond))
	switch {
	case peak == 0:
		t.Errorf("no VmHWM was read from /proc/%d/status: the peak RSS is unknown", p.cmd.Process.Pid)
	case raceBuild():
		t.Logf("race detector on: the peak RSS is not checked against %d MiB", topicsMemoryLimitMiB)
	case peak > topicsMemoryLimitMiB:
		t.Errorf("peak RSS %.1f MiB for %d topics x %d partitions: over the %d MiB limit", peak, len(topics), partitions, topicsMemoryLimitMiB)
	}
}

// raceBuild reports whether this binary, and so the replay child it
// starts, was built with the race detector.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
