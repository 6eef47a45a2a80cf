package main

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// fakeRun is a run's snapshots as a test moves them, on a fake clock.
type fakeRun struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeRun) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeRun) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// snap builds a snapshot of partitions 0 [0, 100) and 1 [10, 210) resumed
// at 10, at the given committed positions; written follows the position.
func snap(next0, next1 int64) runner.Snapshot {
	ps := []runner.PartitionSnapshot{
		{Partition: 0, Start: 0, End: 100, From: 0, Next: next0, Read: next0, Written: next0, Done: next0 == 100},
		{Partition: 1, Start: 10, End: 210, From: 10, Next: next1, Read: next1 - 10, Written: next1 - 10, Done: next1 == 210},
	}
	s := runner.Snapshot{Partitions: ps, Done: ps[0].Done && ps[1].Done}
	for _, p := range ps {
		s.Read += p.Read
		s.Written += p.Written
		s.Offsets += p.Offsets()
		s.Replayed += p.Replayed()
	}
	s.Remaining = s.Offsets - s.Replayed
	return s
}

// waitFor waits until the display drew a line matching re.
func waitFor(t *testing.T, out *testenv.Buffer, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	testenv.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return rx.MatchString(out.String()) },
		func() string { return fmt.Sprintf("no line matches %q:\n%s", re, out) })
}

// The progress display, forced on a buffer (mpb then draws each frame
// below the last, without terminal escapes): a bar per partition and a
// total, with offsets done/total, records written, rate and ETA; at the
// end a finished partition reads done, an unfinished one stopped.
func TestProgressDisplay(t *testing.T) {
	var out testenv.Buffer
	run := &fakeRun{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newProgressDisplay(&out, "orders", snap(0, 10), progressOptions{now: run.clock, width: 160})
	waitFor(t, &out, `(?m)^ *orders/1 .* 0/200 offsets +0% +0 written +0 rec/s +ETA -$`)

	run.advance(time.Second)
	d.update(snap(50, 110))
	waitFor(t, &out, `(?m)^ *orders/0 .* 50/100 offsets +50% +50 written +50 rec/s +ETA 1s$`)
	waitFor(t, &out, `(?m)^ *orders/1 .* 100/200 offsets +50% +100 written +100 rec/s +ETA 1s$`)
	waitFor(t, &out, `(?m)^ *total .* 150/300 offsets +50% +150 written +150 rec/s +ETA 1s$`)

	run.advance(time.Second)
	d.update(snap(100, 130))
	waitFor(t, &out, `(?m)^ *orders/0 .* 100/100 offsets +100% +100 written +50 rec/s +done *$`)

	run.advance(time.Second)
	d.finish(snap(100, 150))
	final := lastFrame(out.String(), 3)
	for i, re := range []string{
		`^ *orders/0 .* 100/100 offsets +100% +100 written +50 rec/s +done *$`, // the rate it ended with
		`^ *orders/1 .* 140/200 offsets +70% +140 written +47 rec/s +stopped *$`,
		`^ *total .* 240/300 offsets +80% +240 written +80 rec/s +stopped *$`,
	} {
		if !regexp.MustCompile(re).MatchString(final[i]) {
			t.Errorf("final line %d: %q does not match %q\n%s", i, final[i], re, out.String())
		}
	}
}

// lastFrame returns the last n lines of s.
func lastFrame(s string, n int) []string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[max(len(l)-n, 0):]
}

// Log lines written while the display is drawn print above the bars, in
// the order written; after it they go to stderr again.
func TestProgressConsole(t *testing.T) {
	var out, stderr testenv.Buffer
	w := &consoleWriter{out: &stderr}
	d := newProgressDisplay(&out, "orders", snap(0, 10), progressOptions{width: 160})
	w.divert(d.p)
	for i := range 3 {
		fmt.Fprintf(w, "log line %d\n", i)
	}
	w.restore(func() { d.finish(snap(100, 210)) })
	fmt.Fprintln(w, "after")
	if !regexp.MustCompile(`(?s)^(.*\n)?log line 0\n.*log line 1\n(.*\n)?log line 2\n.*\ntotal .* 300/300 offsets .* done *\n$`).MatchString(out.String()) {
		t.Errorf("log lines not above the bars:\n%s", out.String())
	}
	if stderr.String() != "after\n" {
		t.Errorf("stderr: %q, want the line written after the display", stderr.String())
	}
}

func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w rateWindow
	if r := w.add(t0, 0); r != 0 {
		t.Fatalf("one sample: %v, want 0", r)
	}
	// 100/s for 20 s, then 10/s: after 5 s more the rate spans the last 10 s.
	for i := 1; i <= 20; i++ {
		w.add(t0.Add(time.Duration(i)*time.Second), int64(100*i))
	}
	var r float64
	for i := 1; i <= 5; i++ {
		r = w.add(t0.Add(time.Duration(20+i)*time.Second), int64(2000+10*i))
	}
	if want := (5*10 + 5*100) / 10.0; r != want {
		t.Fatalf("rate %v, want %v (the last 10 s)", r, want)
	}
	if len(w.samples) > 12 {
		t.Fatalf("%d samples kept, want those of the last 10 s", len(w.samples))
	}
}
