//go:build linux

package main

// BenchmarkKafkaSinkExactlyOnce compares, on one broker and the same
// window, the kafka sink at least once, the kafka sink with exactly_once,
// and kcat as an outside peer (kcat -C | kcat -P, which keeps key and value
// but not headers):
//
//	go test -run '^$' -bench KafkaSinkExactlyOnce -benchtime 3x ./cmd/replay
//
// REPLAY_BENCH_EOS_RECORDS sets the records (default 200000, 4 partitions).
// Each round replays the window into fresh target topics with fresh plans.
// Reported (median over the rounds): alo-rec/s, eos-rec/s, kcat-rec/s and
// x-alo (exactly once / at least once; the goal is at least 0.7).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
)

func BenchmarkKafkaSinkExactlyOnce(b *testing.B) {
	records := 200_000
	if s := os.Getenv("REPLAY_BENCH_EOS_RECORDS"); s != "" {
		var err error
		if records, err = strconv.Atoi(s); err != nil || records < 1 {
			b.Fatalf("REPLAY_BENCH_EOS_RECORDS=%q: want a positive number", s)
		}
	}
	sb := testenv.NewKafka(b, testenv.Partitions(eosPartitions), testenv.Topics("orders"))
	end := time.Now().UTC().Truncate(time.Second)
	seed := sb.Seed(b, sandbox.Seed{Topic: "orders", N: records, From: end.Add(-24 * time.Hour), To: end})
	kcat, kcatErr := exec.LookPath("kcat")
	dir := b.TempDir()
	var alo, eos, kc []float64
	round := 0
	for b.Loop() {
		round++
		run := func(kind, extra string) float64 {
			topic := fmt.Sprintf("bench-%s-%d", kind, round)
			sb.CreateTopic(b, topic, eosPartitions, nil)
			name := fmt.Sprintf("bench-%s-%d", kind, round)
			body := fmt.Sprintf("version: 1\nname: %s\nsource: {brokers: [%q], topic: orders}\ngroup: replay.%s\nwindow: {from: %s, to: %s}\nsink: {type: kafka, brokers: [%q], topic: %s%s}\n",
				name, sb.Addr, name, seed.From.Add(-time.Hour).Format(time.RFC3339), end.Format(time.RFC3339), sb.Addr, topic, extra)
			path := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "run", "--yes", path)
			cmd.Env = append(os.Environ(), execEnv+"=1")
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", name, err, out)
			}
			rate := float64(records) / time.Since(start).Seconds()
			benchCheckCount(b, sb, topic, records)
			return rate
		}
		alo = append(alo, run("alo", ""))
		eos = append(eos, run("eos", ", exactly_once: true"))
		if kcatErr == nil {
			topic := fmt.Sprintf("bench-kcat-%d", round)
			sb.CreateTopic(b, topic, eosPartitions, nil)
			pipe := fmt.Sprintf("%s -C -b %s -t orders -e -q -K '\\t' | %s -P -b %s -t %s -K '\\t'", kcat, sb.Addr, kcat, sb.Addr, topic)
			start := time.Now()
			if out, err := exec.Command("sh", "-c", pipe).CombinedOutput(); err != nil {
				b.Fatalf("kcat pipe: %v\n%s", err, out)
			}
			kc = append(kc, float64(records)/time.Since(start).Seconds())
			benchCheckCount(b, sb, topic, records)
		}
		b.Logf("round %d: at least once %.0f rec/s, exactly once %.0f rec/s", round, alo[len(alo)-1], eos[len(eos)-1])
		if len(kc) > 0 {
			b.Logf("round %d: kcat -C | kcat -P %.0f rec/s", round, kc[len(kc)-1])
		}
	}
	b.ReportMetric(benchMedian(alo), "alo-rec/s")
	b.ReportMetric(benchMedian(eos), "eos-rec/s")
	if len(kc) > 0 {
		b.ReportMetric(benchMedian(kc), "kcat-rec/s")
	}
	b.ReportMetric(benchMedian(eos)/benchMedian(alo), "x-alo")
}

// benchCheckCount checks that topic holds n data records, read committed.
func benchCheckCount(b *testing.B, sb *testenv.Kafka, topic string, n int) {
	b.Helper()
	got := 0
	for _, r := range sb.ReadTopic(b, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		if !r.Attrs.IsControl() {
			got++
		}
	}
	if got != n {
		b.Fatalf("%s holds %d records, want %d", topic, got, n)
	}
}
