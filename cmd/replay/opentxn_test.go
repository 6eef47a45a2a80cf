package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestOpenTransactionCommand: a transaction left open with committed
// records after it. `replay plan` shows the partition (its last stable
// offset, high watermark and producer); `replay run` delivers what is
// stable, waits source.open_transaction_timeout, then fails with exit 1
// naming the partition, the last stable offset and the high watermark;
// once the transaction commits, the same command resumes and the output
// holds exactly what kcat reads under read_committed.
func TestOpenTransactionCommand(t *testing.T) {
	sb := testenv.NewKafka(t, testenv.Topics("orders"))
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	rec := func(i int) *kgo.Record {
		return &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, `{"i":%d}`, i), Timestamp: t0.Add(time.Duration(i) * time.Second)}
	}
	sb.Produce(t, "orders", rec(0), rec(1), rec(2)) // offsets 0-2
	open := sb.Client(t, kgo.TransactionalID("stuck-producer"), kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("orders"))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, rec(3)).FirstErr(); err != nil { // offset 3, left open
		t.Fatal(err)
	}
	other := sb.Client(t, kgo.TransactionalID("other-producer"), kgo.DefaultProduceTopic("orders"))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(ctx, rec(4), rec(5)).FirstErr(); err != nil { // 4-5, committed (marker 6)
		t.Fatal(err)
	}
	if err := testenv.EndTransaction(ctx, other, true, "orders"); err != nil { // the marker is at 6 before 7 is produced
		t.Fatal(err)
	}
	sb.Produce(t, "orders", rec(7)) // 7, plain
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := filepath.Join(dir, "plan.yaml")
	body := fmt.Sprintf(`version: 1
name: open-txn
source: {brokers: [%q], topic: orders, open_transaction_timeout: 2s}
group: replay.open-txn
window: {offsets: {0: {from: earliest, to: latest}}}
sink: %s
`, sb.Addr, fileSink(out, 100))
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := replay(t, "plan", file)
	if r.code != exitOK || !strings.Contains(r.stdout, "partition 0: open-transaction: a transaction (producer id") ||
		!strings.Contains(r.stdout, "transactional id stuck-producer") || !strings.Contains(r.stdout, "holds the last stable offset at 3, below the end 8 (high watermark 8)") {
		t.Fatalf("plan: want the open transaction shown: %s", r)
	}
	r = replay(t, "run", "--yes", file)
	if r.code != exitFailed {
		t.Fatalf("run: want exit %d, got %s", exitFailed, r)
	}
	for _, s := range []string{"partition orders/0 at offset 3", "last stable offset of orders/0 at 3, below the range end 8 (high watermark 8)", "transactional id stuck-producer", "source.open_transaction_timeout"} {
		if !strings.Contains(r.text(), s) {
			t.Errorf("the error does not say %q: %s", s, r.text())
		}
	}
	t.Logf("open-transaction timeout: %s", r.text())
	if cp := checkpoints(t, file, 1)[0]; cp.Offset != 3 {
		t.Fatalf("committed %d, want 3 (everything before the open transaction)", cp.Offset)
	}
	if err := testenv.EndTransaction(ctx, open, true, "orders"); err != nil {
		t.Fatal(err)
	}
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("resume: %s", r)
	}
	want := strings.Fields(string(testenv.Kcat(t, "-C", "-b", sb.Addr, "-t", "orders", "-p", "0", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%o\n")))
	if got := lineCount(t, out); got != len(want) || len(want) != 7 {
		t.Fatalf("the output holds %d records, kcat reads %d under read_committed: %v", got, len(want), want)
	}
}
