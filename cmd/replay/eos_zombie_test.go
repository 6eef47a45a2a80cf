package main

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestExactlyOnceZombieCannotLowerTheGroup: a process whose transaction
// committed and which then stalled (the broker holds the first plain
// OffsetCommit past the range start it sends before a second process
// starts, as if the process froze right before it) cannot move the group's offsets back once a second
// process fenced it and finished: with the target on the source cluster
// the transactions are the group's only commits. The group's offsets are
// read after each step and never decrease.
func TestExactlyOnceZombieCannotLowerTheGroup(t *testing.T) {
	t.Parallel()
	testenv.RequireKfake(t, "ControlKey and SleepControl hold an OffsetCommit")
	sb, dir, planFile := eosSetup(t, 4000, 2000)
	const group = "replay.eos"
	release := make(chan struct{})
	var held, armed atomic.Bool // armed while the first run is the only one
	armed.Store(true)
	sb.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		c := req.(*kmsg.OffsetCommitRequest)
		if c.Group != group || held.Load() || !armed.Load() {
			return nil, nil, false
		}
		for _, rt := range c.Topics {
			for _, rp := range rt.Partitions {
				if rp.Offset > 0 && held.CompareAndSwap(false, true) {
					sb.SleepControl(func() { <-release })
					return nil, nil, false // then processed as sent
				}
			}
		}
		return nil, nil, false
	})
	high := map[int32]int64{}
	step := func(name string) {
		t.Helper()
		for p, o := range sb.Committed(t, group, "orders") {
			if o.At < high[p] {
				t.Errorf("%s: the group's offset of partition %d moved back from %d to %d", name, p, high[p], o.At)
			}
			high[p] = max(high[p], o.At)
		}
	}
	p := startProcess(t, dir, "run", "--yes", planFile)
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		return len(readCommitted(t, sb, "orders-eos", kgo.ReadCommitted())) > 0
	}, "the first run commits a transaction")
	step("after the first run's first transaction")
	armed.Store(false)
	if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("the second run: %s", r)
	}
	step("after the second run")
	close(release)
	<-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != exitRefused {
		t.Errorf("the first run: exit %d, want %d (fenced): %s", code, exitRefused, p.stderr)
	}
	step("after the first run woke up")
	t.Logf("plain OffsetCommit of the first run held: %v", held.Load())
	checkExactlyOnce(t, sb)
	checkGroupAtEnds(t, planFile)
}
