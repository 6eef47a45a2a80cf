package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
)

// A source cluster that keeps refusing fetches for longer than
// retry.max_elapsed fails the run with exit 1: the message names the
// partition, the offset it committed, the attempts and the last error, and
// the hint says how to resume.
func TestRunRetryBudgetSpent(t *testing.T) {
	testenv.RequireKfake(t, "kfake.Fault fails every Fetch")
	k, seed := newCluster(t, 1, 0)
	for i := range 10 { // small record batches: the window takes several fetches
		s := seed
		s.N, s.Rand = 100, uint64(i+1)
		k.Seed(t, s)
	}
	h := k.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1, When: func(req kmsg.Request) bool {
		r := req.(*kmsg.FetchRequest)
		return len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 && r.Topics[0].Partitions[0].FetchOffset >= 200
	}})
	defer h.Remove()
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "budget", addr: k.Addr, from: seed.From.AddDate(0, 0, -1), to: seed.To,
		sink: fileSink(filepath.Join(dir, "out.jsonl"), 50)})
	body, _ := os.ReadFile(file)
	if err := os.WriteFile(file, append(body, "retry: {max_elapsed: 1s}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := replay(t, "run", "--yes", file)
	t.Logf("stderr:\n%s", r.stderr)
	if r.code != exitFailed {
		t.Fatalf("exit %d, want %d: %s", r.code, exitFailed, r)
	}
	for _, want := range []string{"partition orders/0 at offset 200", "which spends the retry budget of 1s (retry.max_elapsed)",
		"Not Leader For Partition", "re-run the same command to resume from the committed offsets"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}
