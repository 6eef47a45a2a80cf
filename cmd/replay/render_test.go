package main

import (
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/runner"
)

// The window line of replay plan and replay run keeps the fraction of a
// second of the window's bounds: a window from 10:00:00.250 printed as
// 10:00:00Z, for review.
func TestWindowBoundsKeepMilliseconds(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 0, 0, 250_000_000, time.UTC)
	to := time.Date(2026, 1, 1, 10, 0, 1, 0, time.UTC)
	at := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	want := "window [2026-01-01T10:00:00.25Z, 2026-01-01T10:00:01Z) resolved at 2026-01-02T00:00:00Z\n"

	var plan strings.Builder
	printPlan(&plan, planView{Plan: "p", ResolvedAt: at, From: from, To: to})
	var run strings.Builder
	printResolution(&run, &runner.Job{Fresh: true, Resolution: &runner.Resolution{Plan: "p", ResolvedAt: at, From: from, To: to}})
	for name, out := range map[string]string{"printPlan": plan.String(), "printResolution": run.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: want the line %q, got:\n%s", name, want, out)
		}
	}
}
