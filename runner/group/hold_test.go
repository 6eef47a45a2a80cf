package group

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks/registry"
)

// testGroup starts a broker (testenv.NewKafka: Apache Kafka when the
// tests are given one) with a topic orders of 3 partitions holding 30
// records, and returns a plan replaying it in group replay.test and a
// function that connects to it.
func testGroup(t *testing.T) (*plan.Plan, func() *source.Cluster) {
	t.Helper()
	sb := testenv.NewKafka(t, testenv.Topics("orders"), testenv.Partitions(3))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sb.Seed(t, sandbox.Seed{Topic: "orders", N: 30, From: t0, To: t0.Add(time.Hour)})
	p, err := plan.Parse(t.Name()+".yaml", []byte(fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: [%q], topic: orders}
group: replay.test
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: file, path: %s}
`, sb.Addr, filepath.Join(t.TempDir(), "out.jsonl"))), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	return p, func() *source.Cluster {
		c, err := source.Connect(context.Background(), p.Source)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		c.SetRetry(source.RetryPolicy{MaxElapsed: time.Duration(p.Retry.MaxElapsed)}) // as a run does
		return c
	}
}

// TestHoldKeptFromAnEarlierStarter: of two runs of one plan that passed
// the group checks together, the one that joined first and held the group
// keeps it, even when the other process started earlier: the newcomer is
// refused naming the holder, and the holder stays the group's only
// member without losing its hold.
func TestHoldKeptFromAnEarlierStarter(t *testing.T) {
	p, connect := testGroup(t)
	c := connect()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder, err := HoldGroup(ctx, c, p)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	// A process of the same plan that started a minute before the holder
	// and joins now (as it would had its group checks passed before the
	// holder joined).
	early := holder.self
	early.PID, early.Since = early.PID+1, early.Since.Add(-time.Minute)
	newcomer := newHold(connect(), p, early)
	err = newcomer.join(ctx)
	if err == nil {
		newcomer.Release()
		t.Fatalf("the newcomer that started earlier took the group from its holder")
	}
	var se *fault.SafetyError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, holder.self.String()) {
		t.Fatalf("newcomer: %v, want the refusal naming the holder (%s)", err, holder.self)
	}
	requireSoleHolder(t, ctx, c, p, holder, "a refused newcomer")
}

// requireSoleHolder waits until h is the only member of p's group, the
// group Stable, and fails t when h lost its hold meanwhile (to other).
func requireSoleHolder(t *testing.T, ctx context.Context, c *source.Cluster, p *plan.Plan, h *Hold, other string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		g, err := c.DescribeGroup(ctx, p.Group)
		return err == nil && g != nil && len(g.Members) == 1 && g.Members[0].ClientID == h.ClientID() &&
			strings.EqualFold(g.State, "Stable")
	}, "the holder is not the group's only member again")
	if err := h.lost.Err(); err != nil {
		t.Fatalf("the holder lost its hold to %s", other)
	}
}

// TestPausedHolderYields: a holder whose session expired while it sent no
// heartbeat (a process paused past the session timeout) finds, when it
// comes back, the run that took the group meanwhile: the new holder keeps
// the group, although the paused one started first, and the paused one
// loses its hold.
func TestPausedHolderYields(t *testing.T) {
	p, connect := testGroup(t)
	c := connect()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Heartbeats that stop for longer than the session, as a paused
	// process's: the coordinator forgets the member.
	paused := joinedOther(t, ctx, connect(), p, selfHolder(p).PID+1, 6*time.Second, 12*time.Second)
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		g, err := c.DescribeGroup(ctx, p.Group)
		return err == nil && g != nil && len(g.Members) == 0
	}, "the paused holder's session did not expire")
	holder, err := HoldGroup(ctx, c, p)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	select {
	case <-paused.lost.Done():
	case <-holder.lost.Done():
		t.Fatal("the holder lost the group to a holder whose session had expired")
	case <-time.After(30 * time.Second):
		t.Fatal("the paused holder did not lose its hold after its session expired")
	}
	requireSoleHolder(t, ctx, c, p, holder, "the paused one")
}

// joinedOther joins p's group as the holder of another process of this
// machine (pid), started a minute before this one, with its own session
// timeout and heartbeat interval; it is released when t ends.
func joinedOther(t *testing.T, ctx context.Context, c *source.Cluster, p *plan.Plan, pid int, session, heartbeat time.Duration) *Hold {
	t.Helper()
	other := selfHolder(p)
	other.PID, other.Since = pid, other.Since.Add(-time.Minute)
	h := newHold(c, p, other)
	h.cfg.SessionTimeout, h.cfg.Heartbeat = session, heartbeat
	if err := h.join(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Release)
	return h
}

// A killed process its parent has not reaped yet (a zombie) holds nothing:
// processExists says it is gone, as for a reaped one, while a live one
// exists.
func TestProcessExistsZombie(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !processExists(pid) {
		t.Fatal("a live process does not exist")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err == nil && strings.Contains(string(b), ") Z ")
	}, "the killed process did not become a zombie")
	if processExists(pid) {
		t.Error("a killed, unreaped process (a zombie) exists")
	}
	_ = cmd.Wait()
	if processExists(pid) {
		t.Error("a killed, reaped process exists")
	}
}

// A run that finds a holder of its plan killed on this machine (its
// process gone, its session not yet expired) lets go of it and holds the
// group at once.
func TestHoldAfterLettingGoOfDead(t *testing.T) {
	p, connect := testGroup(t)
	c := connect()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// A member whose process is gone: it sends no heartbeat the test
	// waits for, and its session outlasts the test.
	joinedOther(t, ctx, connect(), p, gone.Process.Pid, time.Minute, time.Hour)
	h, err := HoldGroup(ctx, c, p)
	if err != nil {
		t.Fatalf("hold after a killed holder: %v", err)
	}
	h.Release()
}
