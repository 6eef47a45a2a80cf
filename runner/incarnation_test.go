package runner

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks/file"
)

// recreateTopic deletes topic and creates it again with partitions
// partitions; it returns the topic's IDs before and after, as Kafka prints
// them.
func recreateTopic(t *testing.T, sb *sandbox.Sandbox, c *Cluster, topic string, partitions int32) (before, after string) {
	t.Helper()
	ctx := context.Background()
	before, err := c.TopicID(ctx, topic)
	if err != nil || before == "" {
		t.Fatalf("topic id before: %q, %v", before, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil || resp.Err != nil {
		t.Fatalf("delete topic: %v %v", err, resp.Err)
	}
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	after, err = c.TopicID(ctx, topic)
	if err != nil || after == "" || after == before {
		t.Fatalf("topic id after: %q (before %q), %v", after, before, err)
	}
	return before, after
}

// The topic's ID goes into the resolution and into every commit's
// metadata (under Kafka's 4096-byte metadata limit).
func TestTopicIDRecorded(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 100, t0, time.Hour)
	p, _ := filePlan(t, sb, "  offsets: {all: {from: earliest, to: latest}}")
	job, _, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := connect(t, p).TopicID(context.Background(), "orders")
	if err != nil || len(id) != 22 || job.Resolution.TopicID != id {
		t.Fatalf("topic id %q (%v), resolution records %q", id, err, job.Resolution.TopicID)
	}
	for part, cp := range commits(t, connect(t, p), p.Group, "orders", 0, 1) {
		if cp.TopicID != id {
			t.Errorf("partition %d: the commit records topic id %q, want %q", part, cp.TopicID, id)
		}
	}
	if m := job.CommitMetadata(0); !strings.Contains(m, `"tid":"`+id+`"`) || len(m) > 4096 {
		t.Errorf("commit metadata %s", m)
	}
}

// A resolution file made on a topic that was deleted and created again is
// refused (a *fault.SafetyError naming both IDs), after a partial run with it.
func TestRecreatedTopicRefusesResolution(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 200, t0, time.Hour)
	p, _ := pinPlan(t, sb, "")
	c := connect(t, p)
	res := saveResolution(t, c, p)
	// A partial run: interrupted after its first commit.
	ctx, cancel := context.WithCancel(context.Background())
	job, err := Prepare(ctx, c, p, pinned(t, res))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, _, err := runPlanJob(t, ctx, job, p); err == nil {
		t.Fatal("the cancelled run finished")
	}
	before, after := recreateTopic(t, sb, c, "orders", 2)
	seed(t, sb, "orders", 300, t0, time.Hour)
	_, err = Prepare(context.Background(), c, p, pinned(t, res))
	var ie *group.IncarnationError
	var se *fault.SafetyError
	if !errors.As(err, &ie) || !errors.As(err, &se) || !strings.Contains(err.Error(), before) || !strings.Contains(err.Error(), after) {
		t.Fatalf("prepare: %v, want a refusal naming topic IDs %s and %s", err, before, after)
	}
}

// A run that reads a topic deleted and created again under it fails before
// it publishes, naming both IDs; the commits it made on the new topic
// (with the old ranges) make the next run refuse the same way.
func TestRecreatedTopicDuringRun(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 150, t0, time.Hour)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	p := testPlan(t, sb, `
version: 1
name: recreated
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.recreated
window:
  offsets: {0: {from: earliest, to: latest}}
throttle: {records_per_second: 50}
sink: {type: file, path: `+out+`, batch_size: 20}
`)
	c := connect(t, p)
	before, after := recreatedDuringRun(t, sb, c, p, func() error { _, _, err := runPlan(t, context.Background(), p, nil); return err })
	var ie *group.IncarnationError
	_, err := Prepare(context.Background(), c, p, testOptions(t))
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), before) || !strings.Contains(err.Error(), after) || !strings.Contains(err.Error(), "checkpoints") {
		t.Fatalf("prepare after: %v, want a refusal naming %s and %s", err, before, after)
	}
	// --restart replays the new topic from scratch.
	opts := testOptions(t)
	opts.Restart = true
	if _, err := Prepare(context.Background(), c, p, opts); err != nil {
		t.Fatalf("--restart: %v", err)
	}
}

// runPlanJob runs a prepared job of p into a file sink at p's path.
func runPlanJob(t *testing.T, ctx context.Context, job *Job, p *plan.Plan) (*Job, *Report, error) {
	t.Helper()
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	rep, err := job.Run(ctx, fs)
	return job, rep, err
}

// waitCommitted waits until p's group committed at least n on partition 0.
func waitCommitted(t *testing.T, c *Cluster, p *plan.Plan, n int64) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		return commits(t, c, p.Group, p.Source.Topic, 0)[0].Offset >= n
	}, "a commit at %d or later", n)
}

// An interval of a schedule whose topic is deleted and created again while
// it runs fails naming both IDs, as a plain run does; the commits it made
// on the new topic make the schedule's next invocation and a re-run of the
// interval refuse the same way, instead of going on from the old log's
// offsets; Restart replays the new topic from the schedule's start.
func TestScheduleRecreatedTopicDuringInterval(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 150, t0, time.Hour)
	db := filepath.Join(t.TempDir(), "out.db")
	p := testPlan(t, sb, `
version: 1
name: recreated-schedule
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.recreated-schedule
window: {every: 1h, zone: UTC, start: `+t0.Format(time.RFC3339)+`}
throttle: {records_per_second: 50}
sink: {type: sqlite, path: `+db+`, table: orders, create_table: true, batch_size: 20}
`)
	c := connect(t, p)
	opts := testOptions(t)
	opts.At = t0.Add(2 * time.Hour)
	job, _, err := PrepareScheduled(context.Background(), c, p, opts)
	if err != nil || job == nil {
		t.Fatalf("PrepareScheduled: %v, %v", job, err)
	}
	sink := openPlanSink(t, p, job)
	defer sink.Close()
	before, after := recreatedDuringRun(t, sb, c, p, func() error { _, err := job.Run(context.Background(), sink); return err })
	var ie *group.IncarnationError
	if _, _, err := PrepareScheduled(context.Background(), c, p, opts); !errors.As(err, &ie) || !strings.Contains(err.Error(), before) {
		t.Fatalf("the next invocation: %v, want a refusal naming %s", err, before)
	}
	if _, err := PrepareInterval(context.Background(), c, p, t0, opts); !errors.As(err, &ie) || !strings.Contains(err.Error(), before) {
		t.Fatalf("a re-run of the interval: %v, want a refusal naming %s", err, before)
	}
	opts.Restart = true
	if job, _, err := PrepareScheduled(context.Background(), c, p, opts); err != nil || job == nil || job.Resolution.TopicID != after {
		t.Fatalf("Restart: %v, %v", job, err)
	}
}

// recreatedDuringRun runs run, deletes and creates p's topic again once
// the run committed 20 records on partition 0 (the reader is done: one
// fetch holds the range; the writer is not), seeds the new topic, and
// checks that the run fails with the recreation: an *group.IncarnationError
// naming the topic's IDs before and after, which it returns.
func recreatedDuringRun(t *testing.T, sb *sandbox.Sandbox, c *Cluster, p *plan.Plan, run func() error) (before, after string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- run() }()
	waitCommitted(t, c, p, 20)
	before, after = recreateTopic(t, sb, c, p.Source.Topic, 1)
	seed(t, sb, p.Source.Topic, 400, t0, time.Hour)
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end")
	}
	var ie *group.IncarnationError
	if !errors.As(err, &ie) || ie.Recorded != before || ie.Now != after {
		t.Fatalf("run: %v, want the topic's recreation (%s, then %s)", err, before, after)
	}
	return before, after
}
