package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestPlanCalendarWindow: `replay plan --at` resolves last: 1d in the
// plan's zone once, shows the instants with the window as written, and
// its ranges hold exactly the records kcat reads in that day.
func TestPlanCalendarWindow(t *testing.T) {
	sb, _, planFile, _ := scheduleSetup(t, 600, schedT0, schedT0.Add(48*time.Hour), "{last: 1d, zone: Europe/Berlin}")
	// 2026-11-30T23:30Z is 00:30 on 1 December in Berlin: yesterday there is
	// 30 November, [2026-11-29T23:00Z, 2026-11-30T23:00Z).
	res := replay(t, "plan", planFile, "--at", "2026-11-30T23:30:00Z")
	if res.code != 0 {
		t.Fatal(res)
	}
	t.Logf("replay plan hourly.yaml --at 2026-11-30T23:30:00Z\n%s", res.stdout)
	want := "window [2026-11-29T23:00:00Z, 2026-11-30T23:00:00Z) (last: 1d in Europe/Berlin) resolved at 2026-11-30T23:30:00Z"
	if !strings.Contains(res.stdout, want) {
		t.Fatalf("want %q in\n%s", want, res.stdout)
	}
	js := replay(t, "plan", planFile, "--at", "2026-11-30T23:30:00Z", "-o", "json")
	if js.code != 0 {
		t.Fatal(js)
	}
	var v struct {
		From, To   time.Time
		Relative   string `json:"window_relative"`
		Partitions []struct {
			Partition  int32
			Start, End int64
		}
	}
	if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, js.stdout)
	}
	from, to := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	if !v.From.Equal(from) || !v.To.Equal(to) || v.Relative != "last: 1d in Europe/Berlin" {
		t.Fatalf("from %s to %s (%q), want [%s, %s)", v.From, v.To, v.Relative, from, to)
	}
	got := coords(v.Partitions)
	if wantC := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, from, to)); len(got) == 0 || !slices.Equal(got, wantC) {
		t.Fatalf("ranges hold %d offsets, kcat reads %d in [%s, %s)", len(got), len(wantC), from, to)
	}
}

// TestPlanOffsetsAll: offsets: {all: ...} gives every partition the same
// range, ending at its own last stable offset.
func TestPlanOffsetsAll(t *testing.T) {
	_, _, planFile, _ := scheduleSetup(t, 300, schedT0, schedT0.Add(time.Hour), "{offsets: {all: {from: 10, to: latest}}}")
	js := replay(t, "plan", planFile, "-o", "json")
	if js.code != 0 {
		t.Fatal(js)
	}
	var v struct {
		Partitions []struct {
			Partition     int32
			Start, End    int64
			HighWatermark int64 `json:"high_watermark"`
		}
	}
	if err := json.Unmarshal([]byte(js.stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, js.stdout)
	}
	if len(v.Partitions) != 3 {
		t.Fatalf("%d partitions, want 3:\n%s", len(v.Partitions), js.stdout)
	}
	for _, p := range v.Partitions {
		if p.Start != 10 || p.End != p.HighWatermark || p.End < 50 {
			t.Errorf("partition %d: [%d, %d) (high watermark %d), want [10, high watermark)", p.Partition, p.Start, p.End, p.HighWatermark)
		}
	}
}

// TestDetailedExitcodeUsageErrorAnyOrder: a usage error exits 1 under
// --detailed-exitcode whether the flag comes before or after the mistake
// (the flag parser stops at the first unknown flag).
func TestDetailedExitcodeUsageErrorAnyOrder(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--detailed-exitcode", "--bogus", "p.yaml"},
		{"plan", "--bogus", "--detailed-exitcode", "p.yaml"},
		{"plan", "p.yaml", "--bogus", "--detailed-exitcode"},
	} {
		if res := replay(t, args...); res.code != 1 || !strings.Contains(res.stderr, "unknown flag: --bogus") {
			t.Errorf("replay %s: exit %d, want 1\n%s", strings.Join(args, " "), res.code, res)
		}
	}
	if res := replay(t, "plan", "--bogus", "p.yaml"); res.code != 2 {
		t.Errorf("without --detailed-exitcode: exit %d, want 2 (a usage error)", res.code)
	}
}
