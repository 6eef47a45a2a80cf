//go:build linux

package main

// BenchmarkPostgresVsCopy measures the postgres sink against its peer in
// the same run: a Go loop (franz-go consumer + pgx CopyFrom, one binary
// COPY stream) that reads the same window and copies the same rows (the
// default layout's columns, computed the same way) into a plain table
// without indexes. There is one sub-benchmark per key template; each of
// its rounds runs the peer once and, for every batch size, `replay run`
// into a fresh table ("fresh"), then again into the full table ("rerun":
// every row unchanged). The peer runs first in odd rounds and last in even
// ones, and the batch sizes take turns at going first, so that batch sizes
// compare within one round, not across minutes of a shared machine.
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
// Reported per sub-benchmark and batch size B (median over the rounds):
// x-copy-fresh-bB and x-copy-rerun-bB (peer wall ÷ replay wall: above 1 =
// replay faster), replay-fresh-s-bB and replay-rerun-s-bB (replay's own
// wall seconds), x-b1000-fresh-bB and x-b1000-rerun-bB (the first batch
// size's wall ÷ B's in the same round: above 1 = B faster), and the
// replay's peak RSS.

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

	"github.com/replay-tool/replay/internal/jsonscan"
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
		b.Run("key="+key, func(b *testing.B) {
			// Per batch size: ratios to the round's peer, replay's own wall
			// seconds, and per round the first batch size's wall time ÷
			// this one's (above 1 = this one faster), fresh and re-run.
			type series struct{ fresh, rerun, freshSec, rerunSec, freshVsFirst, rerunVsFirst []float64 }
			per := make([]series, len(batches))
			var rss []float64
			round := 0
			for b.Loop() {
				round++
				// The order rotates over the rounds: the peer first or last,
				// and the batch sizes starting at a different one each round.
				var peer benchRun
				runPeer := func() {
					benchCheckpoint(b, dsn)
					peer = benchCopyPeer(b, dsn, addr, records)
				}
				if round%2 == 1 {
					runPeer()
				}
				first := make([]benchRun, len(batches))
				second := make([]benchRun, len(batches))
				for k := range batches {
					i := (k + round/2) % len(batches)
					table := fmt.Sprintf("bench_%d_%d", os.Getpid(), time.Now().UnixNano())
					benchCheckpoint(b, dsn)
					first[i] = benchReplayPG(b, bin, addr, dir, dsn, table, key, batches[i], round, 0)
					benchCheckpoint(b, dsn)
					second[i] = benchReplayPG(b, bin, addr, dir, dsn, table, key, batches[i], round, 1)
					benchDropTable(b, dsn, table)
					if first[i].lines != records || second[i].lines != records {
						b.Fatalf("round %d, batch %s: the table holds %d rows after the first run, %d after the second; want %d", round, batches[i], first[i].lines, second[i].lines, records)
					}
				}
				if round%2 == 0 {
					runPeer()
				}
				line := fmt.Sprintf("round %d: peer COPY %.2fs", round, peer.elapsed.Seconds())
				for i := range batches {
					f, r := first[i].elapsed.Seconds(), second[i].elapsed.Seconds()
					sr := &per[i]
					sr.fresh = append(sr.fresh, peer.elapsed.Seconds()/f)
					sr.rerun = append(sr.rerun, peer.elapsed.Seconds()/r)
					sr.freshSec = append(sr.freshSec, f)
					sr.rerunSec = append(sr.rerunSec, r)
					sr.freshVsFirst = append(sr.freshVsFirst, first[0].elapsed.Seconds()/f)
					sr.rerunVsFirst = append(sr.rerunVsFirst, second[0].elapsed.Seconds()/r)
					rss = append(rss, first[i].rssMiB, second[i].rssMiB)
					line += fmt.Sprintf(" | batch %s: fresh %.2fs (%.2fx, %.1f MiB), rerun %.2fs (%.2fx, %.1f MiB)", batches[i],
						f, sr.fresh[len(sr.fresh)-1], first[i].rssMiB, r, sr.rerun[len(sr.rerun)-1], second[i].rssMiB)
				}
				b.Log(line)
			}
			b.ReportMetric(0, "ns/op")
			for i, batch := range batches {
				sr := per[i]
				b.ReportMetric(benchMedian(sr.fresh), "x-copy-fresh-b"+batch)
				b.ReportMetric(benchMedian(sr.rerun), "x-copy-rerun-b"+batch)
				b.ReportMetric(benchMedian(sr.freshSec), "replay-fresh-s-b"+batch)
				b.ReportMetric(benchMedian(sr.rerunSec), "replay-rerun-s-b"+batch)
				vs := ""
				if i > 0 {
					b.ReportMetric(benchMedian(sr.freshVsFirst), "x-b"+batches[0]+"-fresh-b"+batch)
					b.ReportMetric(benchMedian(sr.rerunVsFirst), "x-b"+batches[0]+"-rerun-b"+batch)
					vs = fmt.Sprintf("; batch %s's wall ÷ this one's, same round: fresh %s, rerun %s", batches[0],
						benchSpread(sr.freshVsFirst, "%.2f"), benchSpread(sr.rerunVsFirst, "%.2f"))
				}
				b.Logf("batch %s over %d rounds (min / median / max): fresh %s, rerun %s; replay's wall seconds: fresh %s, rerun %s%s", batch, len(sr.fresh),
					benchSpread(sr.fresh, "%.2f"), benchSpread(sr.rerun, "%.2f"), benchSpread(sr.freshSec, "%.2f"), benchSpread(sr.rerunSec, "%.2f"), vs)
			}
			b.ReportMetric(slices.Max(rss), "replay-peak-MiB")
		})
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
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = testenv.WaitFor(wait, 100*time.Millisecond, func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&n)
		return err != nil || n == 0
	})
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
				if jsonscan.Valid(r.Value) {
					doc = r.Value
				}
				hs := make([]record.Header, len(r.Headers))
				for i, h := range r.Headers {
					hs[i] = record.Header{Key: h.Key, Value: h.Value}
				}
				rows <- []any{fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset), r.Topic, r.Partition, r.Offset, r.Timestamp,
					doc, r.Value, r.Key, []byte(string(encode.AppendHeadersJSON(nil, hs)))}
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
