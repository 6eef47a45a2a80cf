package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replay-tool/replay/runner/source"
)

// With many partitions and a budget far below partitions × fetch size ×
// batch size, readers wait for memory and workers write partial batches
// when their reader starves: the run completes (no partition waits for a
// batch that the budget never lets it fill), every record is written once,
// and the budget is whole again afterwards.
func TestFetchBudgetManyPartitions(t *testing.T) {
	const partitions, n = 40, 40000 // ~1000 records of ~330 B per partition: several fetches each
	old := source.FetchBudget
	source.FetchBudget = 256 << 10
	t.Cleanup(func() { source.FetchBudget = old })
	sb := newTestCluster(t, partitions, "orders")
	seed(t, sb, "orders", n, t0, time.Hour)
	p, out := filePlan(t, sb, fmt.Sprintf("  from: %s\n  to: %s", t0.Format(time.RFC3339), t0.Add(time.Hour).Format(time.RFC3339)))
	p.Sink.BatchSize = 5000 // more than a partition holds: only starvation or the range end flushes
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, rep, err := runPlan(t, ctx, p, nil)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var written int64
	for _, pr := range rep.Partitions {
		written += pr.Written
	}
	if written != n {
		t.Errorf("written %d, want %d", written, n)
	}
	coords := readCoords(t, out)
	seen := map[string]bool{}
	for _, c := range coords {
		if seen[c] {
			t.Fatalf("record %s written twice", c)
		}
		seen[c] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct records in the output, want %d", len(seen), n)
	}
	if held := job.c.FetchMemory(); held != 0 {
		t.Errorf("the readers still hold %d bytes of the budget after the run", held)
	}
}
