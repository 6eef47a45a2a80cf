package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks/file"
)

// TestHoldLostSaysWhy: a run whose principal loses its ACL on the replay
// group mid-run (the heartbeat and the join again refused) stops with
// group.ErrHoldLost and the refusal, which names the ACL to grant, instead
// of only the usual reasons a hold ends.
func TestHoldLostSaysWhy(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 3000, t0, time.Hour)
	p, out := filePlan(t, sb, "  from: "+t0.Format(time.RFC3339)+"\n  to: "+t0.Add(time.Hour).Format(time.RFC3339))
	p.Throttle.RecordsPerSecond = 600
	c := connect(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := HoldGroup(ctx, c, p)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
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
	defer fs.Close()
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
	refuse := func(kr kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		resp := kr.ResponseKind()
		switch r := resp.(type) {
		case *kmsg.HeartbeatResponse:
			r.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case *kmsg.JoinGroupResponse:
			r.ErrorCode = kerr.GroupAuthorizationFailed.Code
		}
		return resp, nil, true
	}
	sb.ControlKey(int16(kmsg.Heartbeat), refuse)
	sb.ControlKey(int16(kmsg.JoinGroup), refuse)
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop after losing its hold")
	}
	if !errors.Is(err, group.ErrHoldLost) || !strings.Contains(err.Error(), "Group Authorization Failed") ||
		!strings.Contains(err.Error(), "grant it Read on the replay group") {
		t.Fatalf("run after losing the hold: %v, want group.ErrHoldLost with the refusal", err)
	}
}
