package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tidwall/gjson"

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
	open := func(table string) *postgres.Sink {
		cfg := postgres.Config{DSN: dsn, Table: table, CreateTable: true, Connections: conns}
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
		return s
	}
	cols := []string{"key", "topic", "partition", "offset", "timestamp", "value", "value_bytes", "kafka_key", "headers"}
	row := func(r *record.Record) ([]any, error) {
		var doc []byte
		if record.ValidJSON(r.Value) {
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
	peer := func() time.Duration {
		table := testenv.TableName()
		open(table).Close() // the same shape as the sink's
		if os.Getenv("REPLAY_BENCH_PG_PEER") == "noindex" {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+table+" DROP CONSTRAINT "+table+"_pkey"); err != nil {
				b.Fatal(err)
			}
		}
		checkpoint()
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
		if err != nil || copied != int64(n) {
			b.Fatalf("the peer copied %d rows (%v), want %d", copied, err, n)
		}
		if _, err := conn.Exec(ctx, "DROP TABLE "+table); err != nil {
			b.Fatal(err)
		}
		return elapsed
	}
	write := func(table string) (time.Duration, sinks.Outcomes) {
		s := open(table)
		defer s.Close()
		checkpoint()
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
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return elapsed, s.Outcomes()
	}
	var fresh, rerun, peerSec, freshSec, rerunSec []float64
	round := 0
	for b.Loop() {
		round++
		var c time.Duration
		if round%2 == 1 {
			c = peer()
		}
		table := testenv.TableName()
		f, fo := write(table)
		r, ro := write(table)
		if fo != (sinks.Outcomes{Inserted: int64(n)}) || ro != (sinks.Outcomes{Unchanged: int64(n)}) {
			b.Fatalf("outcomes %+v, then %+v: want %d inserted, then as many unchanged", fo, ro, n)
		}
		if _, err := conn.Exec(ctx, "DROP TABLE "+table); err != nil {
			b.Fatal(err)
		}
		if round%2 == 0 {
			c = peer()
		}
		fresh, rerun = append(fresh, c.Seconds()/f.Seconds()), append(rerun, c.Seconds()/r.Seconds())
		peerSec, freshSec, rerunSec = append(peerSec, c.Seconds()), append(freshSec, f.Seconds()), append(rerunSec, r.Seconds())
		b.Logf("round %d: copy %.3fs, fresh %.3fs (%.2fx), rerun %.3fs (%.2fx)", round, c.Seconds(), f.Seconds(), fresh[len(fresh)-1], r.Seconds(), rerun[len(rerun)-1])
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(fresh), "x-copy-fresh")
	b.ReportMetric(median(rerun), "x-copy-rerun")
	b.ReportMetric(median(peerSec), "copy-s")
	b.ReportMetric(median(freshSec), "fresh-s")
	b.ReportMetric(median(rerunSec), "rerun-s")
	b.Logf("%d records, batch %d, %d rounds (min / median / max): fresh %.2f / %.2f / %.2f, rerun %.2f / %.2f / %.2f x raw COPY", n, batch, len(fresh),
		slices.Min(fresh), median(fresh), slices.Max(fresh), slices.Min(rerun), median(rerun), slices.Max(rerun))
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
