package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestStatusAndResetRetry: status and reset go through the same retry
// policy as a run (retry.max_elapsed): a coordinator loading, then moving,
// on their group reads and deletes is ridden out, not an exit 1.
func TestStatusAndResetRetry(t *testing.T) {
	testenv.RequireKfake(t, "kfake.Fault fails the group's requests")
	env := newGroupTestEnv(t, 2, 400)
	if _, err := env.run(t, env.file, 0); err != nil {
		t.Fatal(err)
	}
	fault := func() *kfake.FaultHandle {
		h := env.sb.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Err: kerr.CoordinatorLoadInProgress, TopLevel: true, Count: 2})
		env.sb.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetDelete}, Err: kerr.NotCoordinator, TopLevel: true, Count: 1})
		env.sb.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeGroups}, Err: kerr.CoordinatorLoadInProgress, Count: 1})
		return h
	}
	h := fault()
	pr := env.status(t, env.file)
	if pr.State == "" || h.Hits() == 0 {
		t.Fatalf("status: state %q, %d faults hit", pr.State, h.Hits())
	}
	h.Remove()
	h = fault()
	code, out, errs := groupTestExec(t, "reset", "--yes", env.file)
	if code != exitOK || !strings.Contains(out, "reset group") || h.Hits() == 0 {
		t.Fatalf("reset exited %d (%d faults hit): %s %s", code, h.Hits(), out, errs)
	}
	h.Remove()
}
