package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestScheduleHoldRefusesASecondRun: while a scheduled run runs, a second
// process of the same plan (another directory, as another cron host would
// be) and a reset are refused (exit 3) naming the first's host and pid;
// once the first ended, the second runs the next interval.
func TestScheduleHoldRefusesASecondRun(t *testing.T) {
	_, dir, planFile, db := scheduleSetup(t, 3000, schedT0, schedT0.Add(2*time.Hour),
		fmt.Sprintf("{every: 1h, start: %s}", schedT0.Format(time.RFC3339)), "throttle: {records_per_second: 1500}")
	at := schedT0.Add(2 * time.Hour).Format(time.RFC3339)
	first := startProcess(t, dir, "run", planFile, "--yes", "--at", at, "--max-intervals", "1")
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		if first.exited() {
			t.Fatalf("the first run ended before the second started: %s", first.result())
		}
		for _, cp := range checkpoints(t, planFile, 3) {
			if cp.Offset > cp.Start {
				return true
			}
		}
		return false
	}, "the first run never committed")
	host, _ := os.Hostname()
	holder := fmt.Sprintf("a run of this plan holds it (host %s, pid %d, since ", host, first.cmd.Process.Pid)
	second := replayProcess(t, t.TempDir(), "run", planFile, "--yes", "--at", at)
	if second.code != exitRefused || !strings.Contains(second.stderr, holder) {
		t.Fatalf("second run while the first holds the plan: want exit 3 with %q, got %s", holder, second)
	}
	t.Logf("second run: %s", strings.TrimSpace(second.stderr))
	reset := replay(t, "reset", planFile, "--yes")
	if reset.code != exitRefused || !strings.Contains(reset.stderr, holder) {
		t.Fatalf("reset while a run holds the plan: want exit 3 with %q, got %s", holder, reset)
	}
	if r := first.result(); r.code != 0 || !strings.Contains(r.stdout, "ran 1 interval") {
		t.Fatalf("first run: %s", r)
	}
	again := replayProcess(t, t.TempDir(), "run", planFile, "--yes", "--at", at)
	if again.code != 0 || !strings.Contains(again.stdout, "ran 1 interval") {
		t.Fatalf("second run after the first ended: %s", again)
	}
	if keys := sinkKeys(t, db); len(keys) != 3000 {
		t.Fatalf("the sink holds %d keys, want 3000", len(keys))
	}
}

// TestScheduleHoldTwoAtOnce: two processes of one scheduled plan started
// at the same moment: one runs, the other is refused naming it, whichever
// of them joined the group first.
func TestScheduleHoldTwoAtOnce(t *testing.T) {
	_, dir, planFile, _ := scheduleSetup(t, 1500, schedT0, schedT0.Add(time.Hour),
		// Several seconds of run: the second process starts (and on Apache
		// Kafka, where its join waits for the holder's next heartbeat,
		// joins the group) before the first is done.
		fmt.Sprintf("{every: 1h, start: %s}", schedT0.Format(time.RFC3339)), "throttle: {records_per_second: 300}")
	at := schedT0.Add(time.Hour).Format(time.RFC3339)
	var procs []*process
	for range 2 {
		p := startProcess(t, dir, "run", planFile, "--yes", "--at", at)
		procs = append(procs, p)
	}
	a, b := procs[0].result(), procs[1].result()
	if codes := fmt.Sprint(min(a.code, b.code), max(a.code, b.code)); codes != "0 3" {
		t.Fatalf("want one run to succeed and one refused (exit 3), got\n%s\n%s", a, b)
	}
	won, lost := procs[0], b
	if a.code != exitOK {
		won, lost = procs[1], a
	}
	if want := fmt.Sprintf("pid %d, since", won.cmd.Process.Pid); !strings.Contains(lost.stderr, want) {
		t.Fatalf("the refused run does not name the other (%q): %s", want, lost)
	}
}

// TestRunHoldRefusesASecondRun: a plain run holds its plan's group: a
// second run of the plan from another directory (where its relative file
// sink would write a second output) and a reset are refused (exit 3)
// naming the first's host and pid, and the group's commits never go
// backwards; once the first ended, the second runs (and finds nothing to
// do).
func TestRunHoldRefusesASecondRun(t *testing.T) {
	sb, seed := newCluster(t, 3, 3000)
	dir := t.TempDir()
	planFile := writePlan(t, dir, planSpec{name: "held", addr: sb.Addr, from: seed.From, to: seed.To,
		recordsPerSecond: 400, sink: fileSink("out.jsonl", 50)})
	first := startProcess(t, dir, "run", "--yes", planFile)
	seen := map[int32]int64{}
	backwards := func() {
		for p, cp := range checkpoints(t, planFile, 3) {
			if cp.Offset < seen[p] {
				t.Errorf("partition %d: the group's commit went back from %d to %d", p, seen[p], cp.Offset)
			}
			seen[p] = max(seen[p], cp.Offset)
		}
	}
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		if first.exited() {
			t.Fatalf("the first run ended before the second started: %s", first.result())
		}
		for _, cp := range checkpoints(t, planFile, 3) {
			if cp.Offset > cp.Start {
				return true
			}
		}
		return false
	}, "the first run never committed")
	backwards()
	host, _ := os.Hostname()
	holder := fmt.Sprintf("a run of this plan holds it (host %s, pid %d, since ", host, first.cmd.Process.Pid)
	other := t.TempDir()
	second := replayProcess(t, other, "run", "--yes", planFile)
	if second.code != exitRefused || !strings.Contains(second.stderr, holder) {
		t.Fatalf("second run while the first holds the plan: want exit 3 with %q, got %s", holder, second)
	}
	t.Logf("second run: %s", strings.TrimSpace(second.stderr))
	if first.exited() {
		t.Fatalf("the first run ended before the second one did: the test proves nothing\nfirst: %s", first.result())
	}
	if _, err := os.Stat(filepath.Join(other, "out.jsonl.parts")); err == nil {
		t.Errorf("the refused run staged output in its directory")
	}
	backwards()
	// status names the holder; it is no --join member.
	st := replay(t, "status", planFile)
	if want := fmt.Sprintf("a run of this plan holds the group (host %s, pid %d, since ", host, first.cmd.Process.Pid); !strings.Contains(st.stdout, want) || strings.Contains(st.stdout, "--join") {
		if !first.exited() { // a run that ended meanwhile holds nothing
			t.Errorf("status while a run holds the plan: want %q and no --join, got %s", want, st)
		}
	}
	reset := replay(t, "reset", planFile, "--yes")
	if reset.code != exitRefused || !strings.Contains(reset.stderr, holder) {
		t.Fatalf("reset while a run holds the plan: want exit 3 with %q, got %s", holder, reset)
	}
	backwards()
	if r := first.result(); r.code != 0 {
		t.Fatalf("first run: %s", r)
	}
	backwards()
	for p, cp := range checkpoints(t, planFile, 3) {
		if !cp.Done() {
			t.Errorf("partition %d: committed %d, want its end %d", p, cp.Offset, cp.End)
		}
	}
	if n := len(lines(string(readFile(t, filepath.Join(dir, "out.jsonl"))))); n != 3000 {
		t.Errorf("the output has %d records, want 3000", n)
	}
	again := replayProcess(t, dir, "run", "--yes", planFile)
	if again.code != 0 || !strings.Contains(again.stdout, "nothing to do") {
		t.Fatalf("second run after the first ended: %s", again)
	}
}

// TestResetRightAfterKill: a run killed (SIGKILL) mid-way still holds its
// group on the coordinator until its session times out; a reset on the
// same machine right after lets go of the dead run instead of refusing
// it, and deletes the plan's commits.
func TestResetRightAfterKill(t *testing.T) {
	k, seed := newCluster(t, 2, 2000)
	dir := t.TempDir()
	planFile := writePlan(t, dir, planSpec{name: "killreset", addr: k.Addr, from: seed.From, to: seed.To, recordsPerSecond: 400,
		sink: fileSink(filepath.Join(dir, "out.jsonl"), 20)})
	run := startProcess(t, dir, "run", planFile, "--yes")
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		if run.exited() {
			t.Fatalf("the run ended before it was killed: %s", run.result())
		}
		for _, cp := range checkpoints(t, planFile, 2) {
			if cp.Offset > cp.Start {
				return true
			}
		}
		return false
	}, "the run never committed")
	run.kill()
	r := replay(t, "reset", planFile, "--yes")
	if r.code != exitOK {
		t.Fatalf("reset right after the run was killed: %s", r)
	}
	for _, cp := range checkpoints(t, planFile, 2) {
		if cp.Offset >= 0 {
			t.Errorf("partition %d still committed at %d after the reset", cp.Partition, cp.Offset)
		}
	}
}
