package sinks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// BenchmarkFileWrite measures the hot path of a file sink: Write of a batch
// of 500 records of 4 partitions, Sync, and Finish at the end, per staging
// layout and format. It reports allocations per batch.
func BenchmarkFileWrite(b *testing.B) {
	cols := plan.Columns{{Name: "partition", Field: "partition"}, {Name: "offset", Field: "offset"}, {Name: "value", Field: "value"}}
	for _, c := range []struct {
		name string
		cfg  sinks.FileConfig
	}{
		{"jsonl", sinks.FileConfig{Path: "out.jsonl"}},
		{"jsonl interleaved", sinks.FileConfig{Path: "out.jsonl", Interleave: true}},
		{"csv", sinks.FileConfig{Path: "out.csv", Format: "csv", Columns: cols}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := c.cfg
			cfg.Path, cfg.RunID = filepath.Join(b.TempDir(), cfg.Path), "bench"
			s, err := sinks.NewFileSink(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batches := benchBatches(4, 500)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, batch := range batches {
					for j := range batch {
						batch[j].Offset = int64(i*len(batch) + j)
					}
					if err := s.Write(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			for p := range batches {
				if err := s.Sync(ctx, int32(p)); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Finish(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func benchBatches(partitions, size int) [][]sinks.Record {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batches := make([][]sinks.Record, partitions)
	for p := range batches {
		for i := 0; i < size; i++ {
			batches[p] = append(batches[p], sinks.Record{Topic: "orders", Partition: int32(p), Time: t,
				Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf(`{"id":%d,"amount":12.5,"note":"some text"}`, i))})
		}
	}
	return batches
}
