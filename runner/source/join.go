package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinConfig is how a process joins a group to share a topic's partitions
// with other processes (the classic group protocol, range assignment).
type JoinConfig struct {
	Group, Topic string
	// ClientID is sent with every request of the membership: how the
	// members tell their peers from other consumers.
	ClientID string
	// Heartbeat, SessionTimeout and RebalanceTimeout are the group
	// protocol's timeouts; 3 s, 30 s and 30 s when zero.
	Heartbeat, SessionTimeout, RebalanceTimeout time.Duration
}

func (cfg JoinConfig) withDefaults() JoinConfig {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 3 * time.Second
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Second
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = 30 * time.Second
	}
	return cfg
}

// protocolType and protocolName are what every member of a replay group
// announces: a consumer of the range assignment.
const (
	protocolType = "consumer"
	protocolName = "range"
)

// Membership is this process's membership of a group: a sequence of
// generations, each with the partitions assigned to it. Its requests go
// through a client of its own and through call (retried within
// retry.max_elapsed). Only UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS and FENCED_INSTANCE_ID end a generation; the
// member then joins again.
type Membership struct {
	c   *Cluster
	cfg JoinConfig
	cl  *kgo.Client

	mu       sync.Mutex
	memberID string
	cur      *Generation // the last generation Next returned
	closed   bool
	// userData is the user data of the member's subscription (the
	// ConsumerMemberMetadata each JoinGroup carries; SetUserData).
	userData []byte
}

// SetUserData sets the user data of the subscription the member's next
// JoinGroups carry (ConsumerMemberMetadata.UserData): the other members
// read it from DescribeGroups (GroupMember.UserData) while the group is
// Stable. The generation joined already keeps what it joined with.
func (m *Membership) SetUserData(b []byte) {
	m.mu.Lock()
	m.userData = slices.Clone(b)
	m.mu.Unlock()
}

// Generation is one generation of a Membership.
type Generation struct {
	Member
	// Partitions are the topic's partitions assigned to this member, sorted.
	Partitions []int32
	ctx        context.Context
	end        context.CancelCauseFunc
	// stopped is closed once the heartbeats and the function of Start ended.
	stopped chan struct{}
	fnDone  chan struct{}
	started sync.Once
}

// ForeignMemberError is a join that met a member it cannot decode, as the
// group's leader: not a member of the same kind as this one.
type ForeignMemberError struct{ Err error }

func (e *ForeignMemberError) Error() string { return e.Err.Error() }

func (e *ForeignMemberError) Unwrap() error { return e.Err }

// ErrGenerationEnded is the cause of a generation's context that ended
// because the group moved on (a rebalance, the session lost) or because
// its function returned.
var ErrGenerationEnded = errors.New("the group's generation ended")

// Join starts a membership of cfg.Group; it joins on the first Next.
func (c *Cluster) Join(cfg JoinConfig) (*Membership, error) {
	opts, err := c.conn.KgoOpts(c.Brokers...)
	if err != nil {
		return nil, fmt.Errorf("join group %s: %w", cfg.Group, err)
	}
	if cfg.ClientID != "" {
		opts = append(opts, kgo.ClientID(cfg.ClientID))
	}
	opts = append(opts, kgo.RequestRetries(0), kgo.DialTimeout(10*time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("join group %s: %w", cfg.Group, err)
	}
	return &Membership{c: c, cfg: cfg.withDefaults(), cl: cl}, nil
}

// Next joins the group's next generation, once the previous one ended and
// its function returned. A failed attempt comes back as an error
// (Retriable tells those that may pass: the member joins again at the next
// Next); a member the leader cannot decode is a *ForeignMemberError.
func (m *Membership) Next(ctx context.Context) (*Generation, error) {
	m.mu.Lock()
	prev, closed := m.cur, m.closed
	m.mu.Unlock()
	if closed {
		return nil, kafka.ErrGroupClosed
	}
	if prev != nil {
		select {
		case <-prev.ctx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		prev.wait()
	}
	gen, err := m.join(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		gen.end(kafka.ErrGroupClosed)
		return nil, kafka.ErrGroupClosed
	}
	m.cur = gen
	return gen, nil
}

// join sends JoinGroup and SyncGroup, as the leader assigning the
// partitions, and starts the generation's heartbeats.
func (m *Membership) join(ctx context.Context) (*Generation, error) {
	resp, err := m.joinGroup(ctx)
	if err != nil {
		return nil, err
	}
	m.setMemberID(resp.MemberID)
	var plan []kmsg.SyncGroupRequestGroupAssignment
	if resp.LeaderID == resp.MemberID {
		if plan, err = m.assign(ctx, resp.Members); err != nil {
			return nil, err
		}
	}
	parts, err := m.syncGroup(ctx, resp.MemberID, resp.Generation, plan)
	if err != nil {
		return nil, err
	}
	gctx, end := context.WithCancelCause(context.Background())
	g := &Generation{Member: Member{Generation: resp.Generation, ID: resp.MemberID}, Partitions: parts, ctx: gctx, end: end,
		stopped: make(chan struct{}), fnDone: make(chan struct{})}
	go func() {
		defer close(g.stopped)
		m.heartbeat(g)
	}()
	return g, nil
}

// waitingRebalance bounds an attempt of JoinGroup or SyncGroup: the
// coordinator answers once every member rejoined, or after the rebalance
// timeout.
func (m *Membership) waitingRebalance(request time.Duration) time.Duration {
	return request + m.cfg.RebalanceTimeout
}

// setMemberID keeps the member ID the coordinator gave (or forgot: "").
func (m *Membership) setMemberID(id string) {
	m.mu.Lock()
	m.memberID = id
	m.mu.Unlock()
}

// forgotten forgets the member ID when err says the coordinator forgot the
// member: it joins afresh.
func (m *Membership) forgotten(err error) {
	if Forgotten(err) {
		m.setMemberID("")
	}
}

// Forgotten reports whether err (a generation's end, Generation.Ended)
// says the coordinator forgot the member: UNKNOWN_MEMBER_ID (its session
// expired, or it was removed) or FENCED_INSTANCE_ID. Its next generation
// is joined as a new member.
func Forgotten(err error) bool {
	return errors.Is(err, kafka.UnknownMemberId) || errors.Is(err, kafka.FencedInstanceID)
}

// groupCall sends a group request (send, through m's client) through
// callWithin, and returns the answer with its error code (code) as
// kafka-go's error, the form Retriable and the callers know. An error
// code that may pass without ending the generation (the coordinator
// moving or loading) is retried.
func groupCall[R any](ctx context.Context, m *Membership, op string, within func(time.Duration) time.Duration, send func(context.Context, kmsg.Requestor) (R, error), code func(R) int16) (R, error) {
	resp, err := callWithin(ctx, m.c, op, within, func(ctx context.Context) (R, error) {
		resp, err := send(ctx, m.cl)
		if err == nil && code(resp) != 0 {
			if err := kafka.Error(code(resp)); !lostPlace(err) && retriable(err) {
				return resp, err
			}
		}
		return resp, err
	})
	if err == nil && code(resp) != 0 {
		err = kafka.Error(code(resp))
	}
	return resp, err
}

// lostPlace reports whether err says the member lost its place in the
// group: the only errors that end a generation.
func lostPlace(err error) bool {
	return errors.Is(err, kafka.UnknownMemberId) || errors.Is(err, kafka.IllegalGeneration) ||
		errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.FencedInstanceID)
}

// joinGroup sends JoinGroup as the member's ID (none the first time),
// through call; MEMBER_ID_REQUIRED (KIP-394) is answered with the ID it
// gives. An attempt may wait for the other members to rejoin (the
// rebalance timeout), beyond the request timeout.
func (m *Membership) joinGroup(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{m.cfg.Topic}
	m.mu.Lock()
	id := m.memberID
	meta.UserData = m.userData
	m.mu.Unlock()
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.cfg.Group, id, protocolType
		req.SessionTimeoutMillis = int32(m.cfg.SessionTimeout.Milliseconds())
		req.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout.Milliseconds())
		proto := kmsg.NewJoinGroupRequestProtocol()
		proto.Name, proto.Metadata = protocolName, meta.AppendTo(nil)
		req.Protocols = []kmsg.JoinGroupRequestProtocol{proto}
		resp, err := groupCall(ctx, m, "join group", m.waitingRebalance, req.RequestWith, func(r *kmsg.JoinGroupResponse) int16 { return r.ErrorCode })
		if errors.Is(err, kafka.MemberIDRequired) {
			id = resp.MemberID
			continue
		}
		if err != nil {
			m.forgotten(err)
			return nil, fmt.Errorf("join group %s: %w", m.cfg.Group, aclNeeded("join group", err))
		}
		return resp, nil
	}
}

// syncGroup sends SyncGroup (with the leader's plan) and returns this
// member's partitions of the topic.
func (m *Membership) syncGroup(ctx context.Context, id string, gen int32, plan []kmsg.SyncGroupRequestGroupAssignment) ([]int32, error) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID, req.GroupAssignment = m.cfg.Group, gen, id, plan
	pt, pn := protocolType, protocolName
	req.ProtocolType, req.Protocol = &pt, &pn
	resp, err := groupCall(ctx, m, "sync group", m.waitingRebalance, req.RequestWith, func(r *kmsg.SyncGroupResponse) int16 { return r.ErrorCode })
	if err != nil {
		m.forgotten(err)
		return nil, fmt.Errorf("sync group %s: %w", m.cfg.Group, err)
	}
	var a kmsg.ConsumerMemberAssignment
	if len(resp.MemberAssignment) == 0 {
		return nil, nil
	}
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		return nil, fmt.Errorf("sync group %s: the assignment cannot be decoded: %w", m.cfg.Group, err)
	}
	var parts []int32
	for _, t := range a.Topics {
		if t.Topic == m.cfg.Topic {
			parts = append(parts, t.Partitions...)
		}
	}
	slices.Sort(parts)
	return parts, nil
}

// assign is the leader's range assignment: the members subscribed to the
// topic, sorted by member ID, each take a contiguous share of its
// partitions, the first ones one more when they do not divide evenly.
func (m *Membership) assign(ctx context.Context, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	parts, err := m.c.Partitions(ctx, m.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("join group %s: %w", m.cfg.Group, err)
	}
	var subscribed []string
	for _, mb := range members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(mb.ProtocolMetadata); err != nil {
			return nil, &ForeignMemberError{Err: fmt.Errorf("unable to read metadata for member %s: %w", mb.MemberID, err)}
		}
		if slices.Contains(meta.Topics, m.cfg.Topic) {
			subscribed = append(subscribed, mb.MemberID)
		}
	}
	slices.Sort(subscribed)
	plan := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(members))
	shares := rangeShares(parts, len(subscribed))
	for _, mb := range members {
		a := kmsg.NewConsumerMemberAssignment()
		if i := slices.Index(subscribed, mb.MemberID); i >= 0 && len(shares[i]) > 0 {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic, t.Partitions = m.cfg.Topic, shares[i]
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{t}
		}
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = mb.MemberID, a.AppendTo(nil)
		plan = append(plan, ga)
	}
	return plan, nil
}

// rangeShares splits parts (sorted) into n contiguous shares.
func rangeShares(parts []int32, n int) [][]int32 {
	shares := make([][]int32, n)
	for i := range shares {
		each, extra := len(parts)/n, len(parts)%n // the first extra shares take one more
		shares[i] = parts[i*each+min(i, extra) : (i+1)*each+min(i+1, extra)]
	}
	return shares
}

// heartbeat keeps g alive until it ends: every Heartbeat interval one
// Heartbeat, retried through call (a coordinator moving or loading, a
// dropped connection, a slow answer) for as long as retry.max_elapsed
// allows. The generation ends with the cause when the coordinator says the
// member lost its place (the member then joins again), when the retries
// are spent, or when g ends otherwise.
func (m *Membership) heartbeat(g *Generation) {
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	// An attempt unanswered for half the session is retried on a new
	// connection while the session lasts.
	within := func(request time.Duration) time.Duration { return min(request, m.cfg.SessionTimeout/2) }
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = m.cfg.Group, g.Generation, g.ID
		_, err := groupCall(g.ctx, m, "heartbeat", within, req.RequestWith, func(r *kmsg.HeartbeatResponse) int16 { return r.ErrorCode })
		if g.ctx.Err() != nil {
			return
		}
		if err != nil {
			m.forgotten(err)
			g.end(fmt.Errorf("%w: heartbeat to group %s: %w", ErrGenerationEnded, m.cfg.Group, err))
			return
		}
	}
}

// Start runs fn for the generation: its context ends when the generation
// does (a rebalance). The generation stays the member's until fn returns;
// a member whose function returns early rejoins, which rebalances the
// whole group. Start is called at most once per generation.
func (g *Generation) Start(fn func(ctx context.Context)) {
	first := false
	g.started.Do(func() {
		first = true
		go func() {
			defer close(g.fnDone)
			fn(g.ctx)
			g.end(ErrGenerationEnded)
		}()
	})
	if !first { // the generation was over before: fn sees it ended
		go fn(g.ctx)
	}
}

// Done is closed when the generation ends.
func (g *Generation) Done() <-chan struct{} { return g.ctx.Done() }

// Ended is why the generation ended (nil while it lasts).
func (g *Generation) Ended() error { return context.Cause(g.ctx) }

// wait waits for the ended generation's heartbeats and function.
func (g *Generation) wait() {
	<-g.stopped
	started := true
	g.started.Do(func() { started = false; close(g.fnDone) })
	if started {
		<-g.fnDone
	}
}

// Close ends the current generation, waits for its function, and leaves
// the group (LeaveGroup, retried like every group call, for at most the
// session timeout): the other members take over at once.
func (m *Membership) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	cur, id := m.cur, m.memberID
	m.mu.Unlock()
	if cur != nil {
		cur.end(kafka.ErrGroupClosed)
		cur.wait()
	}
	var err error
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SessionTimeout)
		err = m.c.leave(ctx, m.cl, m.cfg.Group, id)
		cancel()
	}
	m.cl.Close()
	return err
}

// leave removes member id from group (LeaveGroup v3+, by member ID)
// through cl, retried through call; a member the coordinator no longer
// knows (UNKNOWN_MEMBER_ID) has left already.
func (c *Cluster) leave(ctx context.Context, cl *kgo.Client, group, id string) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, id
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = id
	req.Members = []kmsg.LeaveGroupRequestMember{lm}
	_, err := call(ctx, c, "leave group", func(ctx context.Context) (struct{}, error) {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return struct{}{}, err
		}
		codes := []int16{resp.ErrorCode}
		for _, mr := range resp.Members {
			codes = append(codes, mr.ErrorCode)
		}
		for _, code := range codes {
			if err := kerr.ErrorForCode(code); err != nil && !errors.Is(err, kerr.UnknownMemberID) {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err != nil {
		return fmt.Errorf("remove member %s from group %s: %w", id, group, err)
	}
	return nil
}
