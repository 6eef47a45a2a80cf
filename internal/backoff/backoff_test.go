package backoff

import (
	"testing"
	"time"
)

// A fake clock: the waits double from Min to Max, each jittered down by at
// most half, the last cut to end with the budget, and the budget counts
// from the first failure.
func TestRetrySchedule(t *testing.T) {
	now := time.Unix(0, 0)
	r := Policy{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond, Budget: time.Second}.Start()
	r.now = func() time.Time { return now }
	base := []time.Duration{100, 200, 400, 400}
	for i, b := range base {
		b *= time.Millisecond
		wait, left, ok := r.Failed()
		if !ok {
			t.Fatalf("attempt %d: gave up with %s of the budget used", i+1, r.Elapsed())
		}
		if wait < b/2 || wait > b {
			t.Fatalf("attempt %d: wait %s, want within [%s, %s]", i+1, wait, b/2, b)
		}
		if want := time.Second - r.Elapsed(); left != want {
			t.Fatalf("attempt %d: left %s, want %s", i+1, left, want)
		}
		now = now.Add(b)
	}
	// 1.1 s after the first failure: spent.
	if _, _, ok := r.Failed(); ok {
		t.Fatalf("not given up after %s of a 1s budget", r.Elapsed())
	}
	if r.Attempts() != 5 {
		t.Fatalf("attempts %d, want 5", r.Attempts())
	}
}

func TestRetryLastWaitEndsWithBudget(t *testing.T) {
	now := time.Unix(0, 0)
	r := Policy{Min: time.Second, Max: time.Second, Budget: 1500 * time.Millisecond}.Start()
	r.now = func() time.Time { return now }
	if _, _, ok := r.Failed(); !ok {
		t.Fatal("gave up at the first failure")
	}
	now = now.Add(1400 * time.Millisecond)
	wait, _, ok := r.Failed()
	if !ok || wait != 100*time.Millisecond {
		t.Fatalf("wait %s ok %v, want the last 100ms of the budget", wait, ok)
	}
}

func TestZeroBudgetGivesUpAtOnce(t *testing.T) {
	r := Policy{Min: time.Millisecond, Max: time.Second}.Start()
	r.now = func() time.Time { return time.Unix(0, 0) }
	if _, _, ok := r.Failed(); ok {
		t.Fatal("a zero budget retried")
	}
	if r.Elapsed() != 0 {
		t.Fatalf("elapsed %s at the first failure", r.Elapsed())
	}
}
