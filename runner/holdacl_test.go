package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/runner/group"
)

// TestHoldLostSaysWhy: a run whose principal loses its ACL on the replay
// group mid-run (the heartbeat and the join again refused) stops with
// group.ErrHoldLost and the refusal, which names the ACL to grant, instead
// of only the usual reasons a hold ends.
func TestHoldLostSaysWhy(t *testing.T) {
	sb, _, _, _, errc := startHeldRun(t)
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
	var err error
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
