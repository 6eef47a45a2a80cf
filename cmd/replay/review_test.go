package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/runner/sandbox"
)

func lineCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestPlanOutAndPinnedRun: plan --out saves the resolution as reviewable
// JSON; run --resolution replays exactly it although the topic grew since,
// and refuses (exit 3) once the plan changed.
func TestPlanOutAndPinnedRun(t *testing.T) {
	sb, seed := newCluster(t, 3, 3000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	spec := planSpec{name: "pinned", addr: sb.Addr, from: seed.From.Add(time.Hour), sink: fileSink(out, 100)}
	spec.to = seed.To.Add(-time.Minute) // in the past but after the seed's last record: the range ends at the high watermark
	file := writePlan(t, dir, spec)
	resolution := filepath.Join(dir, "resolution.json")

	r := replay(t, "plan", "--out", resolution, file)
	if r.code != exitOK || !strings.Contains(r.stdout, "resolution saved to "+resolution) {
		t.Fatalf("plan --out: %s", r)
	}
	var saved struct {
		Format      string `json:"format"`
		Plan        string `json:"plan"`
		Fingerprint string `json:"fingerprint"`
		ResolvedAt  string `json:"resolved_at"`
		From, To    string
		Ranges      []struct{ Partition, Start, End int64 }
	}
	b := readFile(t, resolution)
	if err := json.Unmarshal(b, &saved); err != nil || saved.Format != "replay.resolution/v1" || saved.Plan != "pinned" || saved.Fingerprint == "" ||
		saved.ResolvedAt == "" || saved.From == "" || saved.To == "" || len(saved.Ranges) != 3 || !strings.Contains(string(b), "\n  \"ranges\": [\n") {
		t.Fatalf("resolution file: %v\n%s", err, b)
	}
	var pinned int64
	for _, rg := range saved.Ranges {
		pinned += rg.End - rg.Start
	}

	// Records stamped inside the window arrive late: a fresh resolution
	// would read them, the pinned run must not.
	sb.Seed(t, sandbox.Seed{Topic: "orders", N: 300, From: seed.From.Add(2 * time.Hour), To: seed.From.Add(3 * time.Hour), Rand: 7})
	r = replay(t, "plan", "--resolution", resolution, file)
	if r.code != exitOK || !strings.Contains(r.stdout, "ranges pinned by "+resolution) {
		t.Fatalf("plan --resolution: %s", r)
	}
	r = replay(t, "run", "--yes", "--resolution", resolution, file)
	if r.code != exitOK {
		t.Fatalf("run --resolution: %s", r)
	}
	if n := lineCount(t, out); int64(n) != pinned {
		t.Fatalf("the pinned run wrote %d records, the file pins %d", n, pinned)
	}

	r = replay(t, "plan", "--detailed-exitcode", "--resolution", resolution, file)
	if r.code != exitOK || !strings.Contains(r.stdout, "resuming") || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("plan --resolution after the pinned run: want exit 0, resuming with nothing to do, got %s", r)
	}

	spec.to = seed.To.Add(-2 * time.Minute)
	writePlan(t, dir, spec)
	r = replay(t, "run", "--yes", "--resolution", resolution, file)
	if r.code != exitRefused || !strings.Contains(r.text(), saved.Fingerprint) || !strings.Contains(r.text(), "plan changed") {
		t.Fatalf("changed plan: want exit %d naming the fingerprint, got %s", exitRefused, r)
	}
	if r := replay(t, "run", "--yes", "--resolution", filepath.Join(dir, "nope.json"), file); r.code != exitInvalid || !strings.Contains(r.text(), "--resolution") {
		t.Fatalf("missing resolution file: want exit %d, got %s", exitInvalid, r)
	}
}

// TestPlanDetailedExitcode: with --detailed-exitcode, 2 means work to do
// only, so an invalid plan or a usage mistake exits 1 (as terraform plan).
func TestPlanDetailedExitcode(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte(invalidPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"invalid plan", []string{"plan", invalid}, exitInvalid},
		{"invalid plan, detailed", []string{"plan", "--detailed-exitcode", invalid}, exitFailed},
		{"missing file, detailed", []string{"plan", "--detailed-exitcode", filepath.Join(dir, "nope.yaml")}, exitFailed},
		{"bad output, detailed", []string{"plan", "--detailed-exitcode", "--output", "xml", invalid}, exitFailed},
		{"two plans, detailed", []string{"plan", "--detailed-exitcode", invalid, invalid}, exitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := replay(t, tt.args...); r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
		})
	}
}

// TestPinnedResolutionChecked: a resolution file edited by hand after
// review is refused (exit 3) with the partition and the offending range
// named, before anything is written: a range that reaches past the window's
// end or starts before its start, a window that is not the plan's. The
// untouched file runs.
func TestPinnedResolutionChecked(t *testing.T) {
	sb, seed := newCluster(t, 3, 3000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	spec := planSpec{name: "pinned", addr: sb.Addr, from: seed.From.Add(6 * time.Hour), to: seed.From.Add(12 * time.Hour), sink: fileSink(out, 100)}
	file := writePlan(t, dir, spec)
	resolution := filepath.Join(dir, "resolution.json")
	if r := replay(t, "plan", "--out", resolution, file); r.code != exitOK {
		t.Fatalf("plan --out: %s", r)
	}
	orig := readFile(t, resolution)
	edit := func(t *testing.T, change func(f map[string]any, ranges []any)) string {
		t.Helper()
		var f map[string]any
		if err := json.Unmarshal(orig, &f); err != nil {
			t.Fatal(err)
		}
		change(f, f["ranges"].([]any))
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "edited.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	set := func(i int, key string, v float64) func(map[string]any, []any) {
		return func(_ map[string]any, rs []any) { rs[i].(map[string]any)[key] = v }
	}
	tests := []struct {
		name   string
		change func(map[string]any, []any)
		want   []string
	}{
		{"end past the window", set(1, "end", 1000), []string{"partition orders/1", "its range [", ", 1000) lies outside ["}},
		{"start before the window", set(2, "start", 0), []string{"partition orders/2", "its range [0, ", "lies outside ["}},
		{"another window", func(f map[string]any, _ []any) { f["to"] = seed.To.Format(time.RFC3339) }, []string{"its window is [", "the plan's window resolved at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := edit(t, tt.change)
			r := replay(t, "run", "--yes", "--resolution", path, file)
			if r.code != exitRefused || !strings.Contains(r.text(), "does not fit the plan's window") {
				t.Fatalf("want exit %d refusing the file, got %s", exitRefused, r)
			}
			for _, s := range tt.want {
				if !strings.Contains(r.text(), s) {
					t.Errorf("the refusal does not say %q: %s", s, r.text())
				}
			}
			if lineCount(t, out) != 0 {
				t.Fatalf("a refused file wrote records")
			}
		})
	}
	if r := replay(t, "run", "--yes", "--resolution", resolution, file); r.code != exitOK {
		t.Fatalf("the untouched file: %s", r)
	}
}

// TestRecreatedTopicRefused: a resolution file records the topic's ID; after
// the topic was deleted and created again under the same name, a run with
// the file is refused (exit 3) naming both IDs, instead of replaying the new
// topic's offsets into the old rows.
func TestRecreatedTopicRefused(t *testing.T) {
	sb, seed := newCluster(t, 2, 400)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "recreated", addr: sb.Addr, from: seed.From, to: seed.To.Add(-time.Minute), sink: fileSink(out, 100)})
	resolution := filepath.Join(dir, "resolution.json")
	if r := replay(t, "plan", "--out", resolution, file); r.code != exitOK {
		t.Fatalf("plan --out: %s", r)
	}
	var saved struct {
		TopicID string `json:"topic_id"`
	}
	if err := json.Unmarshal(readFile(t, resolution), &saved); err != nil || len(saved.TopicID) != 22 {
		t.Fatalf("resolution file: topic_id %q (%v)", saved.TopicID, err)
	}
	if r := replay(t, "run", "--yes", "--resolution", resolution, file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	if err := sb.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	sb.CreateTopic(t, "orders", 2, nil)
	sb.Seed(t, sandbox.Seed{Topic: "orders", N: 600, From: seed.From, To: seed.To, Rand: 3})
	r := replay(t, "run", "--yes", "--resolution", resolution, file)
	if r.code != exitRefused || !strings.Contains(r.text(), saved.TopicID) || !strings.Contains(r.text(), "deleted and created again") {
		t.Fatalf("want exit %d naming topic id %s, got %s", exitRefused, saved.TopicID, r)
	}
	t.Logf("refusal: %s", r.text())
}
