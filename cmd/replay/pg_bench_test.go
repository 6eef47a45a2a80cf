//go:build linux

package main

// BenchmarkPostgresVsCopy measures the postgres sink against its peer in
// the same run: a Go loop (franz-go consumer + pgx CopyFrom, one binary
// COPY stream) that reads the same window and copies the same rows (the
// default layout's columns, computed the same way) into a plain table
// without indexes. Each round runs the peer and `replay run` in
// alternating order; the replay writes a fresh table ("fresh"), then runs
// again into the full table ("rerun": every row unchanged).
//
//	go test -run '^$' -bench PostgresVsCopy -benchtime 3x ./cmd/replay
//
// Environment:
//
//	REPLAY_BENCH_PG_RECORDS  records to seed and replay (default 250000)
//	REPLAY_BENCH_PG_DSN      the database (default: the tests' PostgreSQL)
//	REPLAY_BENCH_PG_BATCHES  batch sizes to run, comma separated (default 1000,10000)
//	REPLAY_BENCH_PG_KEYS     key templates: "default" and/or "id" ('{{ .Value.id }}'), comma separated (default "default,id")
//	REPLAY_BENCH_GOMEMLIMIT  GOMEMLIMIT for the replay process (default: unset, main's own limit)
//	REPLAY_BENCH_PG_COPY_THRESHOLD  the plan's copy_threshold (default: unset, the plan's default)
//
// Reported per sub-benchmark (median over the rounds): x-copy-fresh and
// x-copy-rerun (peer wall ÷ replay wall: above 1 = replay faster),
// replay-fresh-s and replay-rerun-s (replay's own wall seconds: batch
// sizes compare on these, since each sub-benchmark's peer runs are its
// own), and the replay's peak RSS.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/encode"
)

func BenchmarkPostgresVsCopy(b *testing.B) {
	records := 250_000
	if s := os.Getenv("REPLAY_BENCH_PG_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("REPLAY_BENCH_PG_RECORDS=%q: want a positive number", s)
		}
		records = n
	}
	dsn := os.Getenv("REPLAY_BENCH_PG_DSN")
	if dsn == "" {
		dsn = testenv.Postgres(b)
	}
	batches := benchList("REPLAY_BENCH_PG_BATCHES", "1000,10000")
	keys := benchList("REPLAY_BENCH_PG_KEYS", "default,id")
	dir := b.TempDir()
	bin := benchBuildReplay(b, dir)
	addr := benchStartSandbox(b, bin, records, benchVariants[0])
	b.Logf("broker %s, %d records; replay %s", addr, records, bin)
	for _, key := range keys {
		for _, batch := range batches {
			b.Run(fmt.Sprintf("key=%s/batch=%s", key, batch), func(b *testing.B) {
				var fresh, rerun []float64
				var freshSec, rerunSec []float64 // replay's own wall times, to compare batch sizes
				var rss []float64
				round := 0
				for b.Loop() {
					round++
					var peer, first, second benchRun
					table := fmt.Sprintf("bench_%d_%d", os.Getpid(), time.Now().UnixNano())
					if round%2 == 1 {
						benchCheckpoint(b, dsn)
						peer = benchCopyPeer(b, dsn, addr, records)
					}
					benchCheckpoint(b, dsn)
					first = benchReplayPG(b, bin, addr, dir, dsn, table, key, batch, round, 0)
					benchCheckpoint(b, dsn)
					second = benchReplayPG(b, bin, addr, dir, dsn, table, key, batch, round, 1)
					if round%2 == 0 {
						benchCheckpoint(b, dsn)
						peer = benchCopyPeer(b, dsn, addr, records)
					}
					benchDropTable(b, dsn, table)
					if first.lines != records || second.lines != records {
						b.Fatalf("round %d: the table holds %d rows after the first run, %d after the second; want %d", round, first.lines, second.lines, records)
					}
					fresh = append(fresh, peer.elapsed.Seconds()/first.elapsed.Seconds())
					rerun = append(rerun, peer.elapsed.Seconds()/second.elapsed.Seconds())
					freshSec = append(freshSec, first.elapsed.Seconds())
					rerunSec = append(rerunSec, second.elapsed.Seconds())
					rss = append(rss, first.rssMiB, second.rssMiB)
					b.Logf("round %d: peer COPY %.2fs | replay fresh %.2fs (%.2fx, %.1f MiB) | rerun %.2fs (%.2fx, %.1f MiB)", round,
						peer.elapsed.Seconds(), first.elapsed.Seconds(), fresh[len(fresh)-1], first.rssMiB,
						second.elapsed.Seconds(), rerun[len(rerun)-1], second.rssMiB)
				}
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(benchMedian(fresh), "x-copy-fresh")
				b.ReportMetric(benchMedian(rerun), "x-copy-rerun")
				b.ReportMetric(benchMedian(freshSec), "replay-fresh-s")
				b.ReportMetric(benchMedian(rerunSec), "replay-rerun-s")
				b.ReportMetric(slices.Max(rss), "replay-peak-MiB")
				b.Logf("over %d rounds (min / median / max): fresh %s, rerun %s; replay's wall seconds: fresh %s, rerun %s", len(fresh),
					benchSpread(fresh, "%.2f"), benchSpread(rerun, "%.2f"), benchSpread(freshSec, "%.2f"), benchSpread(rerunSec, "%.2f"))
			})
		}
	}
}

func benchList(env, def string) []string {
	s := os.Getenv(env)
	if s == "" {
		s = def
	}
	return strings.Split(s, ",")
}

// benchReplayPG replays the whole topic into table with a fresh plan and
// checks that the table then holds every record.
func benchReplayPG(b *testing.B, bin, addr, dir, dsn, table, key, batch string, round, run int) benchRun {
	b.Helper()
	name := fmt.Sprintf("bench-pg-%d-%d-%d-%d", os.Getpid(), round, run, time.Now().UnixNano())
	keyLine := ""
	if key == "id" {
		keyLine = "  key: '{{ .Value.id }}'\n"
	}
	if ct := os.Getenv("REPLAY_BENCH_PG_COPY_THRESHOLD"); ct != "" {
		keyLine += "  copy_threshold: " + ct + "\n"
	}
	planFile := filepath.Join(dir, name+".yaml")
	yaml := fmt.Sprintf(`version: 1
name: %s
description: BenchmarkPostgresVsCopy round %d.
owner: bench
source:
  brokers: [%q]
  topic: %s
  partitions: all
group: replay.%s
window:
  from: -25h
sink:
  type: postgres
  dsn: %q
  table: %s
  create_table: true
  overwrite: true
  batch_size: %s
%s`, name, round, addr, benchTopic, name, dsn, table, batch, keyLine)
	if err := os.WriteFile(planFile, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(planFile)
	cmd := exec.Command(bin, "run", "--yes", "--log-level", "warn", planFile)
	if lim := os.Getenv("REPLAY_BENCH_GOMEMLIMIT"); lim != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+lim)
	}
	out := filepath.Join(dir, name+".out")
	r := benchRunTimed(b, cmd, out, out)
	conn := benchConnect(b, dsn)
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&r.lines); err != nil {
		b.Fatal(err)
	}
	return r
}

// benchCheckpoint starts each timed run on a database with no dirty
// buffers and no vacuum of an earlier round's table in progress: a
// CHECKPOINT (the previous run's writes are flushed now, not by a
// checkpoint in the middle of the next one) after waiting for autovacuum
// workers to finish, at most 30 s.
func benchCheckpoint(b *testing.B, dsn string) {
	b.Helper()
	ctx := context.Background()
	conn := benchConnect(b, dsn)
	defer conn.Close(ctx)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&n); err != nil || n == 0 {
			break
		}
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		b.Logf("CHECKPOINT: %v (the run starts without it)", err)
	}
}

// benchConnect connects to dsn; the caller closes the connection.
func benchConnect(b *testing.B, dsn string) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	return conn
}

func benchDropTable(b *testing.B, dsn, table string) {
	conn := benchConnect(b, dsn)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
		b.Fatal(err)
	}
}

// benchCopyPeer reads every record of the topic with a franz-go consumer
// and copies the default layout's rows into a plain table with one
// binary COPY, as the records arrive; it returns the wall time.
func benchCopyPeer(b *testing.B, dsn, addr string, records int) benchRun {
	b.Helper()
	ctx := context.Background()
	conn := benchConnect(b, dsn)
	defer conn.Close(ctx)
	table := fmt.Sprintf("bench_peer_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, `CREATE TABLE `+table+` (key text, topic text, partition int, "offset" bigint, "timestamp" timestamptz,
	value jsonb, value_bytes bytea, kafka_key bytea, headers jsonb)`); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, "DROP TABLE "+table) }()
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(benchTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rows := make(chan []any, 4096)
	errc := make(chan error, 1)
	go func() {
		defer close(rows)
		n := 0
		for n < records {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				errc <- err
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				n++
				var doc []byte
				if record.ValidJSON(r.Value) {
					doc = r.Value
				}
				hs := make([]record.Header, len(r.Headers))
				for i, h := range r.Headers {
					hs[i] = record.Header{Key: h.Key, Value: h.Value}
				}
				rows <- []any{fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset), r.Topic, r.Partition, r.Offset, r.Timestamp,
					doc, r.Value, r.Key, []byte(encode.HeadersJSON(hs))}
			})
		}
		errc <- nil
	}()
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, []string{"key", "topic", "partition", "offset", "timestamp", "value", "value_bytes", "kafka_key", "headers"},
		pgx.CopyFromFunc(func() ([]any, error) {
			row, ok := <-rows
			if !ok {
				return nil, nil
			}
			return row, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	if n != int64(records) {
		b.Fatalf("the peer copied %d rows, want %d", n, records)
	}
	return benchRun{elapsed: elapsed, lines: int(n)}
}
