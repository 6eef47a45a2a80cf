package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestExactlyOnceJoinSurvivesAKilledMember: two `replay run --join`
// processes share a plan into a topic with exactly_once; one is killed
// (SIGKILL) mid-run, the other takes its partitions over (fencing the
// dead member's transactional ids, committing as its own member) and
// finishes: a read_committed read of the target holds each source record
// exactly once, and the group is at the range ends.
func TestExactlyOnceJoinSurvivesAKilledMember(t *testing.T) {
	t.Parallel()
	sb, dir, planFile := eosSetup(t, 12000, 1500)
	ranges := filepath.Join(dir, "ranges.json")
	if r := replayProcess(t, dir, "plan", planFile, "--out", ranges); r.code != exitOK {
		t.Fatalf("plan --out: %s", r)
	}
	start := func() *process {
		p := startProcess(t, dir, "run", "--yes", "--join", "--resolution", ranges, planFile)
		return p
	}
	running := func(p *process, name string) {
		if p.exited() {
			t.Fatalf("member %s ended too early: %s", name, p.result())
		}
	}
	committed := func() int { return len(readCommitted(t, sb, "orders-eos", kgo.ReadCommitted())) }
	a := start()
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool { running(a, "a"); return committed() > 0 },
		"member a to commit its first transaction")
	b := start()
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		running(a, "a")
		running(b, "b")
		return committed() >= 4000
	}, "4000 records committed before a is killed")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	case <-time.After(90 * time.Second):
		t.Fatal("the surviving member did not finish within 90 s")
	}
	r := b.result()
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "joined the replay group") || strings.Contains(l, "owns the partition") {
			t.Log(l)
		}
	}
	if r.code != exitOK {
		t.Fatalf("surviving member: %s", r)
	}
	if !strings.Contains(r.stderr+r.stdout, `"partitions":[0,1,2,3]`) {
		t.Errorf("the survivor never took all four partitions:\n%s", r.stderr)
	}
	checkExactlyOnce(t, sb)
	checkGroupAtEnds(t, planFile)
}
