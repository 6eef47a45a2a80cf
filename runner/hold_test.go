package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks/file"
)

// startHeldRun starts a run of 3000 records over 3 partitions, throttled to
// 600 records/s, that holds its plan's group, and waits for its first
// commit; Run's error comes on the channel.
func startHeldRun(t *testing.T) (*sandbox.Sandbox, *Cluster, *plan.Plan, context.Context, <-chan error) {
	t.Helper()
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 3000, t0, time.Hour)
	p, out := filePlan(t, sb, "  from: "+t0.Format(time.RFC3339)+"\n  to: "+t0.Add(time.Hour).Format(time.RFC3339))
	p.Throttle.RecordsPerSecond = 600
	c := connect(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	hold, err := HoldGroup(ctx, c, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hold.Release)
	opts := testOptions(t)
	opts.Hold = hold
	job, err := Prepare(ctx, c, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewJSONL(out, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	errc := make(chan error, 1)
	go func() { _, err := job.Run(ctx, fs); errc <- err }()
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		for _, cp := range commits(t, c, p.Group, "orders", 0, 1, 2) {
			if cp.Offset > cp.Start {
				return true
			}
		}
		return false
	}, "the run never committed")
	return sb, c, p, ctx, errc
}

// TestHoldLostStopsTheRun: a plain run holding its plan's group that loses
// the hold (another member joined, which ends the hold's generation) stops
// with group.ErrHoldLost and commits nothing further; the group's commits stay
// where they were, short of the ends.
func TestHoldLostStopsTheRun(t *testing.T) {
	_, c, p, ctx, errc := startHeldRun(t)
	// Another member joins: the hold's generation ends.
	m, err := c.Join(source.JoinConfig{Group: p.Group, Topic: "orders", ClientID: "intruder", Heartbeat: time.Second,
		SessionTimeout: group.JoinSessionTimeout, RebalanceTimeout: group.JoinRebalanceTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	go m.Next(ctx)
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop after losing its hold")
	}
	if !errors.Is(err, group.ErrHoldLost) {
		t.Fatalf("run after losing the hold: %v, want group.ErrHoldLost", err)
	}
	after := commits(t, c, p.Group, "orders", 0, 1, 2)
	// Whatever of the run outlives Run (the commit batcher lingers a
	// moment) ends: nothing is left that could commit.
	testenv.Eventually(t, 30*time.Second, time.Millisecond, func() bool {
		return testenv.Goroutines("replay/runner.(*") == 0
	}, "the run's goroutines ended")
	if again := commits(t, c, p.Group, "orders", 0, 1, 2); !maps.Equal(after, again) {
		t.Fatalf("the group's commits moved after the run stopped: %v then %v", after, again)
	}
	for part, cp := range after {
		if cp.Done() {
			t.Errorf("partition %d is done (%d): the run did not stop early", part, cp.Offset)
		}
	}
}

// TestHoldRestartDropsDiscarded: a held --restart run of a changed plan
// that reads fewer partitions deletes the earlier run's checkpoints on the
// others (the hold leaves the group for it: the broker refuses to delete
// the commits of a topic a member subscribes to), keeps its hold, and the
// group ends with this plan's commits only.
func TestHoldRestartDropsDiscarded(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 600, t0, time.Hour)
	window := "  from: " + t0.Format(time.RFC3339) + "\n  to: " + t0.Add(time.Hour).Format(time.RFC3339)
	p, _ := filePlan(t, sb, window)
	if _, _, err := runPlan(t, context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	changed := *p
	changed.Source.Partitions = plan.PartitionSet{List: []int32{0}}
	c := connect(t, &changed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := HoldGroup(ctx, c, &changed)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	opts := testOptions(t)
	opts.Hold, opts.Restart = hold, true
	job, err := Prepare(ctx, c, &changed, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path+".2", job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if _, err := job.Run(ctx, fs); err != nil {
		t.Fatalf("held restart: %v", err)
	}
	g, err := c.DescribeGroup(ctx, p.Group)
	if err != nil || g == nil || len(g.Members) != 1 {
		t.Fatalf("after the run the hold is not the group's only member: %+v %v", g, err)
	}
	cps := commits(t, c, p.Group, "orders", 0, 1, 2)
	if cp := cps[0]; cp.Fingerprint != changed.Fingerprint() || !cp.Done() {
		t.Errorf("partition 0: %+v, want this plan's commit at its end", cp)
	}
	for _, part := range []int32{1, 2} {
		if cps[part].Offset >= 0 {
			t.Errorf("partition %d: the earlier run's commit %d is still there", part, cps[part].Offset)
		}
	}
}

// A holder whose process is gone is let go of at once only when its PID
// can be checked here: the same host name, boot and PID namespace
// (localMachine). One of the same host name in another container or boot
// (another machine hash), or of an earlier version (none), is refused and
// named until its session times out; the same hash, a dead PID, is
// removed and the hold is taken.
func TestHoldLetsGoOnlyOfDeadHoldersOfThisMachine(t *testing.T) {
	if group.LocalMachine() == "" {
		t.Skip("no boot ID or PID namespace to tell machines apart")
	}
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 10, t0, time.Minute)
	p, _ := filePlan(t, sb, "  from: "+t0.Format(time.RFC3339)+"\n  to: "+t0.Add(time.Minute).Format(time.RFC3339))
	c := connect(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name, machine string
		letGo         bool
	}{{"another container", "0123456789ab", false}, {"an earlier version", "", false}, {"this machine", group.LocalMachine(), true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := group.Holder{Fingerprint: p.Fingerprint(), Host: host, PID: dead.Process.Pid, Since: time.Now().UTC(), Machine: tc.machine}
			id := h.ClientID()
			if tc.machine == "" {
				id = strings.TrimSuffix(id, "/") // the five fields an earlier version wrote
			}
			m, err := c.Join(source.JoinConfig{Group: p.Group, Topic: "orders", ClientID: id, Heartbeat: time.Second,
				SessionTimeout: group.JoinSessionTimeout, RebalanceTimeout: group.JoinRebalanceTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			go m.Next(ctx)
			testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
				g, err := c.DescribeGroup(ctx, p.Group)
				return err == nil && g != nil && len(g.Members) == 1
			}, "the stand-in holder never joined")
			hold, err := HoldGroup(ctx, c, p)
			if tc.letGo {
				if err != nil {
					t.Fatalf("a dead holder of this machine was not let go of: %v", err)
				}
				hold.Release()
				return
			}
			var se *fault.SafetyError
			if err == nil {
				hold.Release()
				t.Fatal("a holder whose PID cannot be checked here was removed")
			}
			if !errors.As(err, &se) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", dead.Process.Pid)) {
				t.Fatalf("HoldGroup: %v, want a refusal naming the holder", err)
			}
		})
	}
}
