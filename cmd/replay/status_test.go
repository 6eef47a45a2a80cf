package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
)

// groupTestEnv is an embedded broker with a seeded topic "orders" and a
// plan file replaying all of it into a JSONL file, in group replay.test.
type groupTestEnv struct {
	sb      *testenv.Kafka
	file    string // the plan
	out     string // the file sink's output
	records int
	from    time.Time // the plan's window start
}

const groupTestGroup = "replay.test"

// newGroupTestEnv seeds records order events over the hour starting 48 h ago.
func newGroupTestEnv(t *testing.T, partitions int32, records int) *groupTestEnv {
	t.Helper()
	sb := testenv.NewKafka(t, testenv.Partitions(partitions), testenv.Topics("orders"))
	from := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)
	sb.Seed(t, sandbox.Seed{Topic: "orders", N: records, From: from, To: from.Add(time.Hour)})
	env := &groupTestEnv{sb: sb, records: records, from: from.Add(-time.Hour)}
	env.file, env.out = env.writePlan(t, "group-test", env.from)
	return env
}

// writePlan writes a plan named name replaying [from, high watermark).
func (e *groupTestEnv) writePlan(t *testing.T, name string, from time.Time) (file, out string) {
	t.Helper()
	dir := t.TempDir()
	file, out = filepath.Join(dir, name+".yaml"), filepath.Join(dir, "out.jsonl")
	yaml := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topic: orders}
group: %s
window:
  from: %s
sink: {type: file, path: %s, batch_size: 50}
`, name, e.sb.Addr, groupTestGroup, from.Format(time.RFC3339), out)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, out
}

// groupTestExec runs the command line in-process with stdin empty (not a
// terminal) and returns the exit code and the output streams.
func groupTestExec(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	a := newApp(&out, &errs)
	root := a.root()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = a.exitCode(root.ExecuteContext(ctx))
	return code, out.String(), errs.String()
}

// status runs `replay status -o json` and decodes it.
func (e *groupTestEnv) status(t *testing.T, file string) runner.Progress {
	t.Helper()
	code, out, errs := groupTestExec(t, "status", "--output", "json", file)
	if code != exitOK {
		t.Fatalf("status exited %d: %s", code, errs)
	}
	var pr runner.Progress
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("status --output json: %v\n%s", err, out)
	}
	return pr
}

// run prepares and runs the plan in planPath with the library; stopAfter > 0
// interrupts it (like SIGINT) once the sink made that many writes durable.
func (e *groupTestEnv) run(t *testing.T, planPath string, stopAfter int64) (*runner.Job, error) {
	t.Helper()
	p, err := plan.Load(planPath, plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := runner.Connect(ctx, p.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	job, err := runner.Prepare(ctx, c, p, runner.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		return nil, err
	}
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	var sink sinks.Sink = fs
	if stopAfter > 0 {
		sink = &groupTestInterruptingSink{Sink: fs, after: stopAfter, cancel: cancel}
	}
	_, err = job.Run(ctx, sink)
	return job, err
}

// groupTestInterruptingSink cancels the run after its after-th durable write.
type groupTestInterruptingSink struct {
	sinks.Sink
	writes atomic.Int64
	after  int64
	cancel context.CancelFunc
}

// Capabilities: none, whatever the wrapped sink declares (the runner then
// commits after every batch).
func (*groupTestInterruptingSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

func (s *groupTestInterruptingSink) Write(ctx context.Context, batch []record.Record) error {
	if err := s.Sink.Write(ctx, batch); err != nil {
		return err
	}
	if s.writes.Add(1) == s.after {
		s.cancel()
	}
	return nil
}

func groupTestLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// Status follows a plan from not started through an interrupted run to done,
// and never changes the group.
func TestStatusBeforeDuringAfterRun(t *testing.T) {
	env := newGroupTestEnv(t, 3, 30000) // several fetches per partition: the interrupted run stops part way

	pr := env.status(t, env.file)
	if pr.State != runner.StateNotStarted || len(pr.Partitions) != 3 {
		t.Fatalf("before a run: state %s with %d partitions, want not-started with 3", pr.State, len(pr.Partitions))
	}
	for _, pp := range pr.Partitions {
		if pp.Committed != -1 || pp.HighWatermark <= 0 {
			t.Errorf("before a run: partition %+v, want no commit and a high watermark", pp)
		}
	}
	if code, out, _ := groupTestExec(t, "status", env.file); code != exitOK || !strings.Contains(out, "state: not started") {
		t.Fatalf("status table before a run (exit %d):\n%s", code, out)
	}

	if _, err := env.run(t, env.file, 3); !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want ErrInterrupted", err)
	}
	pr = env.status(t, env.file)
	if pr.State != runner.StateInProgress {
		t.Fatalf("after an interrupted run: state %s, want in-progress", pr.State)
	}
	if pr.Records != int64(env.records) || pr.Replayed <= 0 || pr.Remaining <= 0 || pr.Replayed+pr.Remaining != pr.Records {
		t.Fatalf("after an interrupted run: records %d, replayed %d, remaining %d; want %d records, partly replayed", pr.Records, pr.Replayed, pr.Remaining, env.records)
	}
	if pr.PercentDone <= 0 || pr.PercentDone >= 100 {
		t.Fatalf("after an interrupted run: %.1f%% done", pr.PercentDone)
	}
	for _, pp := range pr.Partitions {
		if !pp.ThisPlan || pp.Committed < pp.Start || pp.Committed > pp.End || pp.Remaining != pp.End-pp.Committed {
			t.Errorf("after an interrupted run: partition %+v", pp)
		}
	}
	code, out, _ := groupTestExec(t, "status", env.file)
	if code != exitOK || !strings.Contains(out, "state: in progress") || !strings.Contains(out, "this plan") || !strings.Contains(out, "TOTAL") {
		t.Fatalf("status table during the replay (exit %d):\n%s", code, out)
	}

	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	pr = env.status(t, env.file)
	if pr.State != runner.StateDone || pr.Remaining != 0 || pr.PercentDone != 100 {
		t.Fatalf("after the run: state %s, %d remaining, %.1f%% done; want done", pr.State, pr.Remaining, pr.PercentDone)
	}
	for _, pp := range pr.Partitions {
		if !pp.Done || pp.Committed != pp.End || pp.End != pp.HighWatermark {
			t.Errorf("after the run: partition %+v, want committed at its end (the high watermark)", pp)
		}
	}
	if n := groupTestLines(t, env.out); n != env.records {
		t.Fatalf("the output has %d records, want %d", n, env.records)
	}
	if code, out, _ := groupTestExec(t, "status", env.file); code != exitOK || !strings.Contains(out, "state: done") || strings.Contains(out, "not published") {
		t.Fatalf("status table after the run (exit %d):\n%s", code, out)
	}
	// Committed to the ends, but staging left (a publish that failed):
	// status says the output is not published and how to publish it.
	if err := os.Mkdir(env.out+".parts", 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := groupTestExec(t, "status", env.file); code != exitOK || !strings.Contains(out, "not published: the staged output "+env.out+".parts") {
		t.Fatalf("status with staging left after the run (exit %d):\n%s", code, out)
	}
}

// A group holding another plan's checkpoints is reported with that plan's
// name and fingerprint (exit 0: status only reads).
func TestStatusOtherPlan(t *testing.T) {
	env := newGroupTestEnv(t, 2, 400)
	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatal(err)
	}
	first := env.status(t, env.file)
	other, _ := env.writePlan(t, "other-plan", env.from.Add(-time.Hour))
	pr := env.status(t, other)
	if pr.State != runner.StateOtherPlan || pr.OtherPlan != "group-test" || pr.OtherFingerprint != first.Fingerprint || pr.Fingerprint == first.Fingerprint {
		t.Fatalf("state %s, other plan %q (%s); want other-plan group-test (%s)", pr.State, pr.OtherPlan, pr.OtherFingerprint, first.Fingerprint)
	}
	for _, pp := range pr.Partitions {
		if pp.ThisPlan || !pp.Replay {
			t.Errorf("partition %+v: want a replay commit of another plan", pp)
		}
	}
	code, out, _ := groupTestExec(t, "status", other)
	if code != exitOK || !strings.Contains(out, "belongs to another plan") || !strings.Contains(out, first.Fingerprint) {
		t.Fatalf("status table (exit %d):\n%s", code, out)
	}
}

func TestStatusUsage(t *testing.T) {
	env := newGroupTestEnv(t, 1, 10)
	if code, _, errs := groupTestExec(t, "status", "--output", "yaml", env.file); code != exitInvalid {
		t.Fatalf("--output yaml: exit %d, want %d: %s", code, exitInvalid, errs)
	}
	if code, _, _ := groupTestExec(t, "status"); code != exitInvalid {
		t.Fatalf("no plan: exit %d, want %d", code, exitInvalid)
	}
}
