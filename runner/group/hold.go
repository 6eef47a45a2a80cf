package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
)

// heldMark is the user data of the hold's subscription once it was the
// group's only member (Hold.settle): a process that joins later, even one
// that started earlier, finds the group held and is refused.
var heldMark = []byte("replay-held")

// holdSettle bounds how long two processes that joined at the same moment
// take to find out which one holds the group.
const holdSettle = 30 * time.Second

// Hold is a run's hold on its plan's replay group: the process is the
// group's only member (the classic group protocol) for the duration of the
// run, so that a second run of the plan, from any machine, is refused
// (CheckMembers names the holder), and the run's commits carry the
// membership's generation. A hold that dies is released by the
// coordinator after the session timeout (10 s). The hold's heartbeats ride
// out a coordinator that moves, loads or drops its connection (retried
// within retry.max_elapsed); a generation that ends while the session
// lasts (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: a process that joined
// at the same moment) is joined again as the same holder, and the run's
// commits carry the new generation. Only when the membership cannot be
// kept (the session expired while the process was paused and another
// run holds the group meanwhile, an earlier holder or another consumer
// joined) does the run stop, and the broker
// refuses its commits (source.ErrFenced).
type Hold struct {
	group string
	self  Holder
	c     *source.Cluster
	cfg   source.JoinConfig
	cg    *source.Membership
	// held is set once the hold was the group's only member: from then on
	// its joins carry heldMark.
	held atomic.Bool

	mu     sync.Mutex
	member *source.Member
	// follow, while a job runs under the hold, makes its commits carry a
	// new generation's member.
	follow func(*source.Member)
	log    zerolog.Logger
	// lost ends when the membership ends before Release.
	lost context.Context
	// stop ends the keeper (keep); done is closed when it returned.
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// HoldGroup makes this process the holder of p's replay group: it refuses
// (*fault.SafetyError) a group another run holds, naming it, or any other group
// with members, then joins it. Of two processes joining at once, the one
// that held the group already keeps it, else the one that started first
// (Hold.alone), and the other is refused. Release leaves the group.
func HoldGroup(ctx context.Context, c *source.Cluster, p *plan.Plan) (*Hold, error) {
	if err := LetGoOfDead(ctx, c, p); err != nil {
		return nil, err
	}
	if err := CheckIdle(ctx, c, p.Group); err != nil {
		return nil, err
	}
	// Never join a group that is, or was, a real consumer group.
	if err := CheckRunnable(ctx, c, p); err != nil {
		return nil, err
	}
	h := newHold(c, p, selfHolder(p))
	if err := h.join(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// newHold is self's hold on p's replay group, not joined yet.
func newHold(c *source.Cluster, p *plan.Plan, self Holder) *Hold {
	return &Hold{group: p.Group, self: self, c: c, log: zerolog.Nop(), cfg: source.JoinConfig{Group: p.Group, Topic: p.Source.Topic, ClientID: self.ClientID(),
		Heartbeat: time.Second, SessionTimeout: JoinSessionTimeout, RebalanceTimeout: JoinRebalanceTimeout}}
}

// selfHolder is this process as the holder of p's group.
func selfHolder(p *plan.Plan) Holder {
	host, _ := os.Hostname()
	return Holder{Fingerprint: p.Fingerprint(), Host: host, PID: os.Getpid(), Since: time.Now().UTC(), Machine: LocalMachine()}
}

// LetGoOfDead removes from p's group the holders of p that ran on this
// machine (the same host name, boot and PID namespace: LocalMachine) in a
// process that no longer exists (killed): otherwise the coordinator keeps
// them until their session times out, and a run resumed (or replay reset)
// at once after a kill is refused naming the dead run. Any other holder
// is left alone, and refused by the checks that follow until its session
// times out: one on another host, in another container or boot (its PID
// means nothing here), of unknown machine, or whose process still exists.
func LetGoOfDead(ctx context.Context, c *source.Cluster, p *plan.Plan) error {
	group, self := p.Group, selfHolder(p)
	g, err := c.DescribeGroup(ctx, group)
	if err != nil || g == nil || g.Err != nil {
		return nil // the group checks that follow refuse it
	}
	for _, m := range g.Members {
		h, ok := parseHolder(m)
		if !ok || h.Host != self.Host || h.Machine == "" || h.Machine != self.Machine || h.Fingerprint != self.Fingerprint || processExists(h.PID) {
			continue
		}
		if err := c.RemoveMember(ctx, group, m.MemberID); err != nil {
			return err
		}
	}
	return nil
}

// processExists reports whether a process with the ID runs on this
// machine (signal 0); this process does not count (its hold is not made
// yet, so one naming its ID is a dead process's whose ID came back), nor
// does a zombie (a killed process its parent has not reaped: state Z in
// /proc/<pid>/stat).
func processExists(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = proc.Signal(syscall.Signal(0))
	if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// join joins the group, settles the hold and starts its keeper.
func (h *Hold) join(ctx context.Context) error {
	cg, err := h.c.Join(h.cfg)
	if err != nil {
		return err
	}
	h.cg = cg
	if h.held.Load() {
		cg.SetUserData(heldMark)
	}
	gen, err := h.settle(ctx)
	if err != nil {
		cg.Close()
		h.cg = nil
		return err
	}
	h.mu.Lock()
	h.member = &gen.Member
	h.mu.Unlock()
	kctx, stop := context.WithCancel(context.Background())
	lost, lose := context.WithCancelCause(context.Background())
	h.lost, h.stop, h.done = lost, stop, make(chan struct{})
	go func() {
		defer close(h.done)
		h.keep(kctx, gen, lose)
	}()
	return nil
}

// keep holds the group from generation gen on until stop: a generation
// that ends is joined again as the same holder; when that fails, lose
// ends the hold.
func (h *Hold) keep(ctx context.Context, gen *source.Generation, lose context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
		case <-gen.Done():
		}
		if ctx.Err() != nil {
			return
		}
		h.logger().Warn().Err(gen.Ended()).Str("group", h.group).Int32("generation", gen.Generation).
			Msg("the hold's generation ended; joining the replay group again as the same holder")
		if source.Forgotten(gen.Ended()) {
			// The coordinator let go of this member (its session expired
			// while the process was paused): it no longer holds the group,
			// and a run that holds it meanwhile keeps it (alone).
			h.held.Store(false)
			h.cg.SetUserData(nil)
		}
		next, err := h.settle(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			h.logger().Error().Err(err).Str("group", h.group).Msg("the hold on the replay group is lost")
			lose(err)
			return
		}
		gen = next
		h.mu.Lock()
		h.member = &gen.Member
		if h.follow != nil {
			h.follow(h.member)
		}
		h.mu.Unlock()
		h.logger().Info().Str("group", h.group).Int32("generation", gen.Generation).Msg("holding the replay group again")
	}
}

func (h *Hold) logger() *zerolog.Logger {
	h.mu.Lock()
	defer h.mu.Unlock()
	return new(h.log)
}

// LeaveFor leaves the group while fn runs, then holds it again, as the
// same holder (a run of the plan that joined meanwhile started later: it
// loses its generation and is waited for). The broker refuses to delete
// the commits of a topic a member of the group subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC), and the hold's membership subscribes to the
// plan's topic. It must not be called while a job runs under the hold.
func (h *Hold) LeaveFor(ctx context.Context, fn func() error) error {
	h.leave()
	err := fn()
	if jerr := h.join(ctx); jerr != nil {
		return errors.Join(err, jerr)
	}
	return err
}

// leave stops the keeper and leaves the group.
func (h *Hold) leave() {
	if h.cg == nil {
		return
	}
	h.stop()
	<-h.done
	h.cg.Close()
	h.cg = nil
}

// settle joins generations until this process is the group's only member,
// or another holder that keeps the group from it is found (alone); one it
// keeps the group from is waited for, up to holdSettle.
func (h *Hold) settle(ctx context.Context) (*source.Generation, error) {
	deadline := time.Now().Add(holdSettle)
	for failures := 0; ; {
		gen, err := h.cg.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && source.Retriable(err) && failures < JoinMaxFailures {
				failures++
				h.logger().Warn().Err(err).Str("group", h.group).Int("attempt", failures).Msg("joining the replay group failed; trying again")
				continue
			}
			return nil, fmt.Errorf("hold group %s: %w", h.group, err)
		}
		quit := make(chan struct{})
		gen.Start(func(c context.Context) {
			select {
			case <-c.Done():
			case <-quit:
			}
		})
		alone, err := h.alone(ctx, gen.ID)
		if err != nil {
			close(quit)
			return nil, err
		}
		if alone {
			if !h.held.Swap(true) {
				h.cg.SetUserData(heldMark)
			}
			return gen, nil
		}
		// Another process joined at the same moment and is refused (or a
		// rebalance is under way): the generation ends when it leaves.
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-gen.Done():
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		close(quit)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("hold group %s: another process still shares it after %s", h.group, holdSettle)
		}
	}
}

// alone reports whether this member (memberID) is the group's only one.
// Of two holders of this plan, one that held the group already (its
// subscription carries heldMark) keeps it and the newcomer is refused,
// whichever process started first; between two that did not (or both
// did), the one that started first keeps it. The newcomer waits for the
// other to be refused and leave. The marks are known only while the group
// is Stable: outside it, a rebalance is under way, this generation ends
// with it, and settle describes the group again. Other members are refused
// as CheckMembers does.
func (h *Hold) alone(ctx context.Context, memberID string) (bool, error) {
	g, err := h.c.DescribeGroup(ctx, h.group)
	switch {
	case err != nil:
		return false, err
	case g == nil || g.Err != nil:
		return false, fmt.Errorf("hold group %s: cannot describe it", h.group)
	}
	stable := strings.EqualFold(g.State, "Stable")
	alone := true
	for _, m := range g.Members {
		if m.MemberID == memberID {
			continue
		}
		other, ok := parseHolder(m)
		switch {
		case !ok:
			return false, &fault.SafetyError{Group: h.group, Hint: fault.HintJoinedOnly, Reason: fmt.Sprintf("a member that is not a run of this plan joined it (client id %q, host %s): use a dedicated group", m.ClientID, m.ClientHost)}
		case m.ClientID == h.self.ClientID():
			// This process, joined by an attempt whose answer was lost:
			// let go of it (the group then rebalances).
			if err := h.c.RemoveMember(ctx, h.group, m.MemberID); err != nil {
				return false, err
			}
		case stable && h.keeps(other, m.UserData, memberID):
			// The other member is refused, and leaves.
		case stable:
			return false, heldError(h.group, other)
		}
		alone = false
	}
	return alone, nil
}

// keeps reports whether this hold keeps the group from other, another
// holder of the plan: the one that held the group already (heldMark in
// otherData) wins; else the one that started first, then the lower ID.
func (h *Hold) keeps(other Holder, otherData []byte, memberID string) bool {
	mine, theirs := h.held.Load(), bytes.Equal(otherData, heldMark)
	if mine != theirs {
		return mine
	}
	return h.self.Since.Before(other.Since) || h.self.Since.Equal(other.Since) && memberID < other.memberID
}

// ClientID is the hold's client ID: the group checks accept the group
// with this process as its member (CheckMembers).
func (h *Hold) ClientID() string { return h.self.ClientID() }

// Release leaves the group: the next run of the plan may start at once.
func (h *Hold) Release() {
	h.once.Do(h.leave)
}

// ErrHoldLost is a run stopped because its hold on the replay group ended
// (its session expired, the coordinator moved): another run may hold the
// plan now, and the broker refuses the stopped run's commits. Re-running
// resumes from the last accepted commit.
var ErrHoldLost = errors.New("this run lost its hold on the replay group (its session expired, the coordinator moved, or the cluster did not answer within retry.max_elapsed) and stopped without committing further")
