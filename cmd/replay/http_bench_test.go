//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// BenchmarkHTTPSinkVsGoClient compares the http sink with its peer, a
// plain Go client loop: a kgo consumer reading the same topic and POSTing
// the same JSON arrays (idempotency_key, then the record as the JSONL
// lines write it) with net/http, one request at a time. Both run as their
// own processes against one seeded broker (`replay sandbox`, a process of
// its own) and one local HTTP server in the benchmark's process, which
// reads every body and counts the records; each round runs the peer and
// replay (a fresh plan) in turn, at batch sizes 1000 and 100.
//
//	go test -run '^$' -bench HTTPSinkVsGoClient -benchtime 5x ./cmd/replay
//
// REPLAY_BENCH_HTTP_RECORDS sets the records (default 200000);
// REPLAY_BENCH_HTTP_PROFILE names a directory for CPU profiles of replay.
// Reported:
// x-peer (peer wall ÷ replay wall, median of the rounds; above 1 replay is
// faster), replay-rec/s and peer-rec/s.
func BenchmarkHTTPSinkVsGoClient(b *testing.B) {
	records := 200000
	if v := os.Getenv("REPLAY_BENCH_HTTP_RECORDS"); v != "" {
		records, _ = strconv.Atoi(v)
	}
	dir := b.TempDir()
	bin := benchBuildReplay(b, dir)
	addr := benchStartSandbox(b, bin, records, benchVariants[0])
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		received.Add(int64(bytes.Count(buf.Bytes(), []byte(`{"idempotency_key":`))))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	for _, batch := range []int{1000, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var ratios, ours, peers []float64
			for round := range b.N {
				received.Store(0)
				peer := exec.Command(os.Args[0], "-test.run=^TestHTTPBenchPeer$")
				peer.Env = append(os.Environ(), "REPLAY_HTTP_PEER_BROKER="+addr, "REPLAY_HTTP_PEER_URL="+srv.URL, fmt.Sprintf("REPLAY_HTTP_PEER_BATCH=%d", batch))
				start := time.Now()
				if out, err := peer.CombinedOutput(); err != nil {
					b.Fatalf("peer: %v\n%s", err, out)
				}
				pw := time.Since(start)
				if n := received.Load(); n != int64(records) {
					b.Fatalf("the peer posted %d records, want %d", n, records)
				}
				received.Store(0)
				rw := benchHTTPReplay(b, bin, addr, srv.URL, dir, batch, round)
				if n := received.Load(); n != int64(records) {
					b.Fatalf("replay posted %d records, want %d", n, records)
				}
				ratios = append(ratios, pw.Seconds()/rw.Seconds())
				ours = append(ours, float64(records)/rw.Seconds())
				peers = append(peers, float64(records)/pw.Seconds())
				b.Logf("round %d: peer %.3fs, replay %.3fs: %.2fx", round, pw.Seconds(), rw.Seconds(), ratios[round])
			}
			b.ReportMetric(benchMedian(ratios), "x-peer")
			b.ReportMetric(benchMedian(ours), "replay-rec/s")
			b.ReportMetric(benchMedian(peers), "peer-rec/s")
			b.Logf("x-peer over %d rounds (min / median / max): %s", len(ratios), benchSpread(ratios, "%.2f"))
		})
	}
}

// benchHTTPReplay runs `replay run` of a fresh plan into the http sink.
func benchHTTPReplay(b *testing.B, bin, addr, url, dir string, batch, round int) time.Duration {
	b.Helper()
	name := fmt.Sprintf("bench-http-%d-%d-%d", os.Getpid(), round, time.Now().UnixNano())
	planFile := filepath.Join(dir, name+".yaml")
	yaml := fmt.Sprintf(`version: 1
name: %s
description: BenchmarkHTTPSinkVsGoClient round %d.
owner: bench
source:
  brokers: [%q]
  topic: %s
  partitions: all
group: replay.%s
window:
  from: -25h
sink:
  type: http
  url: %s
  batch_size: %d
`, name, round, addr, benchTopic, name, url, batch)
	if err := os.WriteFile(planFile, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(planFile)
	args := []string{"run", "--yes", "--log-level", "warn", planFile}
	if d := os.Getenv("REPLAY_BENCH_HTTP_PROFILE"); d != "" { // a CPU profile of each run, for pprof
		args = append(args, "--cpu-profile", filepath.Join(d, fmt.Sprintf("replay-http-%d-%d.prof", batch, round)))
	}
	cmd := exec.Command(bin, args...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("replay run: %v\n%s", err, out)
	}
	return time.Since(start)
}

// TestHTTPBenchPeer is the peer of BenchmarkHTTPSinkVsGoClient, run as a
// process of its own; it does nothing without REPLAY_HTTP_PEER_BROKER.
func TestHTTPBenchPeer(t *testing.T) {
	broker := os.Getenv("REPLAY_HTTP_PEER_BROKER")
	if broker == "" {
		t.Skip("the peer of BenchmarkHTTPSinkVsGoClient")
	}
	url := os.Getenv("REPLAY_HTTP_PEER_URL")
	batch, _ := strconv.Atoi(os.Getenv("REPLAY_HTTP_PEER_BATCH"))
	ctx := context.Background()
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, benchTopic)
	adm.Close()
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]map[int32]kgo.Offset{benchTopic: {}}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			offsets[benchTopic][o.Partition] = kgo.NewOffset().AtStart()
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumePartitions(offsets))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	client := &http.Client{}
	pending := map[int32][]*kgo.Record{}
	var body []byte
	post := func(recs []*kgo.Record) {
		body = append(body[:0], '[')
		var line []byte
		for i, kr := range recs {
			if i > 0 {
				body = append(body, ',')
			}
			r := record.Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Key: kr.Key, Value: kr.Value, Time: kr.Timestamp}
			for _, h := range kr.Headers {
				r.Headers = append(r.Headers, record.Header{Key: h.Key, Value: h.Value})
			}
			body = append(body, `{"idempotency_key":`...)
			body = encode.AppendJSONString(body, kr.Topic+"/"+strconv.Itoa(int(kr.Partition))+"/"+strconv.FormatInt(kr.Offset, 10))
			line = encode.AppendJSONL(line[:0], &r)
			body = append(body, ',')
			body = append(body, line[1:len(line)-1]...)
		}
		body = append(body, ']')
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST: %s", resp.Status)
		}
	}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			pending[p] = append(pending[p], r)
			done := r.Offset+1 >= left[p]
			if len(pending[p]) == batch || done {
				post(pending[p])
				pending[p] = pending[p][:0]
			}
			if done {
				delete(left, p)
			}
		})
	}
}
