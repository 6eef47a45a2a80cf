//go:build linux

package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/postgres"
)

// BenchmarkSinkVsCopy measures the sink's Write against raw COPY of the
// same rows in the same run: each round copies the default layout's rows
// of the records (computed as the sink computes them) with one pgx
// CopyFrom into a table of the same shape (made by the sink's
// create_table: the same columns, types and primary key), writes the
// records with the sink into a fresh table ("fresh": 6 partitions written
// at once in batches, as a run's workers write them), then again into the
// full table ("rerun": every row there, unchanged). The peer runs first in
// odd rounds and last in even ones; each timed part starts after a
// CHECKPOINT.
//
//	go test -run '^$' -bench SinkVsCopy -benchtime 5x ./sinks/postgres
//
// REPLAY_BENCH_PG_RECORDS sets the records (default 100000),
// REPLAY_BENCH_PG_BATCH the batch size (default 1000),
// REPLAY_BENCH_PG_CONNECTIONS the sink's connections (default 1);
// REPLAY_BENCH_PG_PEER=noindex drops the primary key of the peer's table
// (the peer of cmd/replay's BenchmarkPostgresVsCopy);
// REPLAY_BENCH_PG_TABLE=mapped writes a table of a column mapping
// (benchMappedColumns: varchar and numeric columns from value paths)
// instead of the default layout, and the peer copies the same cells into
// a table of the same DDL. Reported: the
// medians of x-copy-fresh and x-copy-rerun (the peer's wall time ÷ the
// sink's: above 1 = the sink faster) and of each side's seconds.
func BenchmarkSinkVsCopy(b *testing.B) {
	n := benchEnvInt(b, "REPLAY_BENCH_PG_RECORDS", 100_000)
	batch := benchEnvInt(b, "REPLAY_BENCH_PG_BATCH", 1000)
	conns := benchEnvInt(b, "REPLAY_BENCH_PG_CONNECTIONS", 1)
	dsn := testenv.Postgres(b)
	const partitions = 6
	parts := make([][]record.Record, partitions)
	for i := range n {
		p := int32(i % partitions)
		off := int64(i / partitions)
		r := record.Record{Topic: "orders", Partition: p, Offset: off,
			Time:    time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
			Key:     fmt.Appendf(nil, "customer-%d", i%5000),
			Value:   fmt.Appendf(nil, `{"id":%d,"customer":"customer-%d","status":"paid","amount":%d.%02d,"currency":"EUR","items":[{"sku":"SKU-%05d","qty":%d},{"sku":"SKU-%05d","qty":1}],"note":"replayed order"}`, i, i%5000, i%997, i%100, i%50000, i%7+1, (i*7)%50000),
			Headers: []record.Header{{Key: "trace-id", Value: fmt.Appendf(nil, "%016x", i*2654435761)}},
		}
		parts[p] = append(parts[p], r)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	checkpoint := func() {
		if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
			b.Logf("CHECKPOINT: %v", err)
		}
	}
	mapped := os.Getenv("REPLAY_BENCH_PG_TABLE") == "mapped"
	opened := 0
	open := func(table string) (*postgres.Sink, string) {
		opened++
		app := fmt.Sprintf("replay-bench-%d-%d", os.Getpid(), opened)
		cfg := postgres.Config{DSN: dsn, Table: table, CreateTable: true, Connections: conns, ApplicationName: app}
		if mapped {
			cfg.CreateTable = false
			if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id text COLLATE "C" PRIMARY KEY, topic text NOT NULL,
partition int NOT NULL, "offset" bigint NOT NULL, ts timestamptz NOT NULL, customer varchar(40), status varchar(20), amount numeric(10,2), doc jsonb)`); err != nil {
				b.Fatal(err)
			}
			cfg.Columns = benchMappedColumns
		}
		s, err := postgres.New(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return s, app
	}
	// backends are the server processes of the connections named app.
	backends := func(app string) []int {
		rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			b.Fatal(err)
		}
		return pids
	}
	var peerPid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&peerPid); err != nil {
		b.Fatal(err)
	}
	cols := []string{"key", "topic", "partition", "offset", "timestamp", "value", "value_bytes", "kafka_key", "headers"}
	row := func(r *record.Record) ([]any, error) {
		var doc []byte
		if jsonscan.Valid(r.Value) {
			doc = r.Value
		}
		return []any{sinks.DefaultKey(r), r.Topic, r.Partition, r.Offset, r.Time, doc, r.Value, r.Key, encode.AppendHeadersJSON(nil, r.Headers)}, nil
	}
	if mapped {
		cols = []string{"id", "topic", "partition", "offset", "ts", "customer", "status", "amount", "doc"}
		row = func(r *record.Record) ([]any, error) {
			var amount pgtype.Numeric
			if err := amount.Scan(gjson.GetBytes(r.Value, "amount").Raw); err != nil {
				return nil, err
			}
			return []any{sinks.DefaultKey(r), r.Topic, r.Partition, r.Offset, r.Time, gjson.GetBytes(r.Value, "customer").String(),
				gjson.GetBytes(r.Value, "status").String(), amount, r.Value}, nil
		}
	}
	peer := func() (time.Duration, float64) {
		table := testenv.TableName()
		probe, _ := open(table) // the same shape as the sink's
		probe.Close()
		if os.Getenv("REPLAY_BENCH_PG_PEER") == "noindex" {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+table+" DROP CONSTRAINT "+table+"_pkey"); err != nil {
				b.Fatal(err)
			}
		}
		checkpoint()
		cpu := startCPU([]int{peerPid})
		start := time.Now()
		p, i := 0, 0
		copied, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols,
			pgx.CopyFromFunc(func() ([]any, error) {
				for p < partitions && i == len(parts[p]) {
					p, i = p+1, 0
				}
				if p == partitions {
					return nil, nil
				}
				i++
				return row(&parts[p][i-1])
			}))
		elapsed := time.Since(start)
		used := cpu.used([]int{peerPid})
		if err != nil || copied != int64(n) {
			b.Fatalf("the peer copied %d rows (%v), want %d", copied, err, n)
		}
		if _, err := conn.Exec(ctx, "DROP TABLE "+table); err != nil {
			b.Fatal(err)
		}
		return elapsed, used
	}
	write := func(table string) (time.Duration, float64, sinks.Outcomes) {
		s, app := open(table)
		defer s.Close()
		checkpoint()
		cpu := startCPU(backends(app))
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, partitions)
		for p := range parts {
			wg.Go(func() {
				for recs := range slices.Chunk(parts[p], batch) {
					if err := s.Write(ctx, recs); err != nil {
						errs[p] = err
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		used := cpu.used(backends(app))
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return elapsed, used, s.Outcomes()
	}
	var fresh, rerun, peerSec, freshSec, rerunSec, freshCPU, rerunCPU []float64
	round := 0
	for b.Loop() {
		round++
		var c time.Duration
		var cc float64
		if round%2 == 1 {
			c, cc = peer()
		}
		table := testenv.TableName()
		f, fc, fo := write(table)
		r, rc, ro := write(table)
		if fo != (sinks.Outcomes{Inserted: int64(n)}) || ro != (sinks.Outcomes{Unchanged: int64(n)}) {
			b.Fatalf("outcomes %+v, then %+v: want %d inserted, then as many unchanged", fo, ro, n)
		}
		if _, err := conn.Exec(ctx, "DROP TABLE "+table); err != nil {
			b.Fatal(err)
		}
		if round%2 == 0 {
			c, cc = peer()
		}
		fresh, rerun = append(fresh, c.Seconds()/f.Seconds()), append(rerun, c.Seconds()/r.Seconds())
		peerSec, freshSec, rerunSec = append(peerSec, c.Seconds()), append(freshSec, f.Seconds()), append(rerunSec, r.Seconds())
		freshCPU, rerunCPU = append(freshCPU, cc/fc), append(rerunCPU, cc/rc)
		b.Logf("round %d: copy %.3fs (CPU %.2fs), fresh %.3fs (%.2fx; CPU %.2fs, %.2fx), rerun %.3fs (%.2fx; CPU %.2fs, %.2fx)", round, c.Seconds(), cc,
			f.Seconds(), fresh[len(fresh)-1], fc, freshCPU[len(freshCPU)-1], r.Seconds(), rerun[len(rerun)-1], rc, rerunCPU[len(rerunCPU)-1])
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(fresh), "x-copy-fresh")
	b.ReportMetric(median(rerun), "x-copy-rerun")
	b.ReportMetric(median(peerSec), "copy-s")
	b.ReportMetric(median(freshSec), "fresh-s")
	b.ReportMetric(median(rerunSec), "rerun-s")
	b.ReportMetric(median(freshCPU), "x-cpu-fresh")
	b.ReportMetric(median(rerunCPU), "x-cpu-rerun")
	b.Logf("%d records, batch %d, %d rounds (min / median / max): fresh %.2f / %.2f / %.2f, rerun %.2f / %.2f / %.2f x raw COPY; CPU: fresh %.2f / %.2f / %.2f, rerun %.2f / %.2f / %.2f",
		n, batch, len(fresh), slices.Min(fresh), median(fresh), slices.Max(fresh), slices.Min(rerun), median(rerun), slices.Max(rerun),
		slices.Min(freshCPU), median(freshCPU), slices.Max(freshCPU), slices.Min(rerunCPU), median(rerunCPU), slices.Max(rerunCPU))
}

// cpuMark is the CPU seconds this process and some server processes had
// used at a moment (Linux: getrusage and /proc/<pid>/stat; 0 elsewhere).
type cpuMark struct {
	self    float64
	servers map[int]float64
}

func startCPU(pids []int) cpuMark {
	m := cpuMark{self: selfCPU(), servers: map[int]float64{}}
	for _, pid := range pids {
		m.servers[pid] = procCPU(pid)
	}
	return m
}

// used is the CPU seconds this process and the server processes pids (the
// ones marked and any started since) used since m.
func (m cpuMark) used(pids []int) float64 {
	total := selfCPU() - m.self
	for _, pid := range pids {
		total += procCPU(pid) - m.servers[pid]
	}
	return total
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procCPU is the user and system CPU seconds of process pid, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// benchMappedColumns map a table of orders: the key, the coordinates, three
// value paths into varchar and numeric columns, the value as jsonb.
var benchMappedColumns = plan.Columns{{Name: "id", Field: "key"}, {Name: "topic", Field: "topic"}, {Name: "partition", Field: "partition"},
	{Name: "offset", Field: "offset"}, {Name: "ts", Field: "timestamp"}, {Name: "customer", Field: "value.customer"},
	{Name: "status", Field: "value.status"}, {Name: "amount", Field: "value.amount"}, {Name: "doc", Field: "value"}}

func benchEnvInt(b *testing.B, env string, def int) int {
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		b.Fatalf("%s=%q: want a positive number", env, s)
	}
	return v
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
