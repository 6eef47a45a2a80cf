package file_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/file"
)

// BenchmarkFileWrite measures the hot path of a file sink: Write of a batch
// of 500 records of 4 partitions, Sync, and Finish at the end, per staging
// layout and format. It reports allocations per batch.
func BenchmarkFileWrite(b *testing.B) {
	cols := plan.Columns{{Name: "partition", Field: "partition"}, {Name: "offset", Field: "offset"}, {Name: "value", Field: "value"}}
	for _, c := range []struct {
		name string
		cfg  file.Config
	}{
		{"jsonl", file.Config{Path: "out.jsonl"}},
		{"jsonl interleaved", file.Config{Path: "out.jsonl", Interleave: true}},
		{"csv", file.Config{Path: "out.csv", Format: "csv", Columns: cols}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := c.cfg
			cfg.Path, cfg.RunID = filepath.Join(b.TempDir(), cfg.Path), "bench"
			s, err := file.New(cfg)
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

func benchBatches(partitions, size int) [][]record.Record {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batches := make([][]record.Record, partitions)
	for p := range batches {
		for i := 0; i < size; i++ {
			batches[p] = append(batches[p], record.Record{Topic: "orders", Partition: int32(p), Time: t,
				Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf(`{"id":%d,"amount":12.5,"note":"some text"}`, i))})
		}
	}
	return batches
}
