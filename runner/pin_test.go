package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks/file"
)

// pinPlan is an offsets plan over all of partitions 0 and 1 (to: latest,
// so resolving again after the topic grew gives other ranges); extra is
// added at the top level.
func pinPlan(t *testing.T, sb *sandbox.Sandbox, extra string) (*plan.Plan, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	return testPlan(t, sb, fmt.Sprintf(`
version: 1
name: pinned
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.pinned
window:
  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}
sink: {type: file, path: %s, batch_size: 100}
%s
`, out, extra)), out
}

// saveResolution resolves p as `replay plan --out` does and reads the file back.
func saveResolution(t *testing.T, c *Cluster, p *plan.Plan) *Resolution {
	t.Helper()
	res, err := Resolve(context.Background(), c, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalResolution(res)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "resolution.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResolution(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Ranges, res.Ranges) || back.Fingerprint != res.Fingerprint || !back.ResolvedAt.Equal(res.ResolvedAt) {
		t.Fatalf("resolution file round trip: got %+v, want %+v", back, res)
	}
	return back
}

func pinned(t *testing.T, res *Resolution) Options {
	opts := testOptions(t)
	opts.Pinned = res
	return opts
}

func rangeCoords(rs []Range) []string {
	var out []string
	for _, r := range rs {
		for o := r.Start; o < r.End; o++ {
			out = append(out, fmt.Sprintf("%d/%d", r.Partition, o))
		}
	}
	return out
}

// A pinned run replays exactly the saved ranges although the topic grew
// since (a fresh resolution would read further), and a re-run with the
// same file finds it done.
func TestPinnedRunReplaysTheFile(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 400, t0, time.Hour)
	p, out := pinPlan(t, sb, "")
	c := connect(t, p)
	res := saveResolution(t, c, p)
	seed(t, sb, "orders", 200, t0.Add(time.Hour), time.Hour)
	if now, _ := Resolve(context.Background(), c, p, time.Now()); now.Total() <= res.Total() {
		t.Fatalf("the topic did not grow: %d offsets now, %d pinned", now.Total(), res.Total())
	}

	job, err := Prepare(context.Background(), c, p, pinned(t, res))
	if err != nil {
		t.Fatal(err)
	}
	if !job.Fresh || job.Resolution.Total() != res.Total() || !job.Resolution.ResolvedAt.Equal(res.ResolvedAt) {
		t.Fatalf("pinned job: fresh %v, %d offsets resolved at %s; want the file's %d at %s", job.Fresh, job.Resolution.Total(), job.Resolution.ResolvedAt, res.Total(), res.ResolvedAt)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	_, err = job.Run(context.Background(), fs)
	fs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readCoords(t, out), rangeCoords(res.Ranges); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("pinned run: %s", diff(want, got))
	}
	again, err := Prepare(context.Background(), c, p, pinned(t, res))
	if err != nil || again.Fresh || !again.NothingToDo() {
		t.Fatalf("re-run with the same file: err %v, fresh %v, nothing to do %v", err, again != nil && again.Fresh, again != nil && again.NothingToDo())
	}
}

// A resolution made for another version of the plan is refused: the
// reviewed ranges belong to a window that is no longer the plan's.
func TestPinnedRefusesChangedPlan(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 100, t0, time.Hour)
	p, _ := pinPlan(t, sb, "")
	c := connect(t, p)
	res := saveResolution(t, c, p)
	changed, _ := pinPlan(t, sb, "allow_data_loss: true")
	_, err := Prepare(context.Background(), c, changed, pinned(t, res))
	var se *fault.SafetyError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), res.Fingerprint) || !strings.Contains(err.Error(), changed.Fingerprint()) {
		t.Fatalf("want a *fault.SafetyError naming fingerprints %s and %s, got %v", res.Fingerprint, changed.Fingerprint(), err)
	}
}

// The group holds checkpoints of this plan for other ranges (an earlier
// run resolved before the topic grew): the pinned run refuses, and with
// Restart discards them and runs the file's ranges.
func TestPinnedRefusesOtherRanges(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 200, t0, time.Hour)
	p, out := pinPlan(t, sb, "")
	if _, _, err := runPlan(t, context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	seed(t, sb, "orders", 200, t0.Add(time.Hour), time.Hour)
	c := connect(t, p)
	res := saveResolution(t, c, p)
	_, err := Prepare(context.Background(), c, p, pinned(t, res))
	var se *fault.SafetyError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "other ranges") {
		t.Fatalf("want a *fault.SafetyError about other ranges, got %v", err)
	}
	opts := pinned(t, res)
	opts.Restart = true
	job, err := Prepare(context.Background(), c, p, opts)
	if err != nil || !job.Fresh || !slices.Equal(job.Discarded(), []int32{0, 1}) {
		t.Fatalf("restart: err %v", err)
	}
	os.Remove(out)
	fs, _ := file.NewJSONL(out, job.RunID())
	_, err = job.Run(context.Background(), fs)
	fs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readCoords(t, out), rangeCoords(res.Ranges); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("restarted pinned run: %s", diff(want, got))
	}
}

// Retention deleted the start of a pinned range since it was saved: an
// error naming the first offset still there, unless the plan accepts data
// loss; then the range stays as pinned (the checkpoints record it) and the
// run starts at the log start, counting the lost offsets.
func TestPinnedRangeBelowLogStart(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 400, t0, time.Hour)
	strict, _ := pinPlan(t, sb, "")
	lossy, out := pinPlan(t, sb, "allow_data_loss: true")
	c := connect(t, strict)
	strictRes, lossyRes := saveResolution(t, c, strict), saveResolution(t, c, lossy)
	if err := sb.DeleteRecords("orders", 0, 50); err != nil {
		t.Fatal(err)
	}

	_, err := Prepare(context.Background(), c, strict, pinned(t, strictRes))
	var re *RetentionError
	if !errors.As(err, &re) || re.Partition != 0 || re.LogStart != 50 || re.FirstTime.IsZero() {
		t.Fatalf("want a RetentionError for partition 0 at log start 50 with its time, got %v", err)
	}

	job, err := Prepare(context.Background(), c, lossy, pinned(t, lossyRes))
	if err != nil {
		t.Fatal(err)
	}
	r0 := job.Resolution.Ranges[0]
	if r0.Start != 0 || r0.Lost != 50 || r0.Outcome != StartBeforeRetention || job.Resume[0] != 50 {
		t.Fatalf("partition 0: %+v, reading from %d; want the pinned start 0, 50 lost, reading from 50", r0, job.Resume[0])
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	_, err = job.Run(context.Background(), fs)
	fs.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := rangeCoords([]Range{{Partition: 0, Start: 50, End: r0.End}, lossyRes.Ranges[1]})
	if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("lossy pinned run: %s", diff(want, got))
	}
	if again, err := Prepare(context.Background(), c, lossy, pinned(t, lossyRes)); err != nil || !again.NothingToDo() {
		t.Fatalf("re-run with the same file: %v", err)
	}
}

func TestReadResolutionRejects(t *testing.T) {
	valid := `{"format": "replay.resolution/v1", "plan": "p", "fingerprint": "f", "topic": "t", "group": "g", "resolved_at": "2026-01-01T00:00:00Z", "ranges": [%s]%s}`
	tests := []struct{ name, body, want string }{
		{"unknown field", fmt.Sprintf(valid, `{"partition": 0, "start": 1, "end": 2}`, `, "extra": 1`), "unknown field"},
		{"misspelt range field", fmt.Sprintf(valid, `{"partition": 0, "strat": 1, "end": 2}`, ""), "unknown field"},
		{"other format", strings.Replace(fmt.Sprintf(valid, `{"partition": 0, "start": 1, "end": 2}`, ""), "v1", "v9", 1), "format"},
		{"no ranges", fmt.Sprintf(valid, ``, ""), "no ranges"},
		{"partition twice", fmt.Sprintf(valid, `{"partition": 0, "start": 1, "end": 2}, {"partition": 0, "start": 1, "end": 2}`, ""), "two ranges"},
		{"start after end", fmt.Sprintf(valid, `{"partition": 0, "start": 3, "end": 2}`, ""), "not a valid offset range"},
		{"not json", `plan: p`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadResolution(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error about %q, got %v", tt.want, err)
			}
		})
	}
}

// A hand-edited resolution file of an offsets window is refused (a
// *fault.SafetyError naming the partition and the range) when a range reaches
// past the window's fixed end or below its fixed start, or pins a
// partition the plan does not select; the untouched file passes.
func TestPinnedRangesChecked(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 600, t0, time.Hour)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: pinned
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.pinned
window:
  offsets: {0: {from: 10, to: 50}, 1: {from: earliest, to: latest}}
sink: {type: file, path: %s, batch_size: 100}
`, out))
	c := connect(t, p)
	res := saveResolution(t, c, p)
	tests := []struct {
		name string
		edit func(r *Resolution)
		want string // "" passes
	}{
		{"untouched", func(r *Resolution) {}, ""},
		{"narrowed", func(r *Resolution) { r.Ranges[0].Start = 20 }, ""},
		{"end past to", func(r *Resolution) { r.Ranges[0].End = 60 }, "partition orders/0: its range [10, 60) lies outside [10, 50)"},
		{"start below from", func(r *Resolution) { r.Ranges[0].Start = 5 }, "partition orders/0: its range [5, 50) lies outside [10, 50)"},
		{"end past latest", func(r *Resolution) { r.Ranges[1].End = r.Ranges[1].HighWatermark + 5 }, "partition orders/1: its range"},
		{"partition not selected", func(r *Resolution) {
			r.Ranges = append(r.Ranges, Range{Partition: 2, Start: 0, End: 10})
		}, "partition orders/2, [0, 10), which the plan does not select"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := *res
			edited.Ranges = slices.Clone(res.Ranges)
			tt.edit(&edited)
			_, err := Prepare(context.Background(), c, p, pinned(t, &edited))
			var se *fault.SafetyError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("prepare: %v", err)
			case tt.want != "" && (!errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) || fault.HintOf(err) != fault.HintResolveAgain):
				t.Fatalf("prepare: %v, want a refusal saying %q", err, tt.want)
			}
		})
	}
}
