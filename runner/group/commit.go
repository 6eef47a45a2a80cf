package group

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source"
)

// Committer commits one run's offsets to its replay group as the member
// the run has there: a joined member (SetMember), the hold's member
// (Follow), or none (standalone commits). It is safe for concurrent use.
type Committer struct {
	c      *source.Cluster
	hold   *Hold
	group  string
	member atomic.Pointer[source.Member]
	batch  *Batcher
}

// NewCommitter returns the committer of a run of partitions partitions in
// group, under hold (nil: none).
func NewCommitter(c *source.Cluster, hold *Hold, group string, partitions int) *Committer {
	k := &Committer{c: c, hold: hold, group: group}
	k.batch = &Batcher{Linger: LingerFor(partitions), Send: k.commitAs}
	return k
}

// Member is the member the commits carry; nil for standalone commits.
func (k *Committer) Member() *source.Member { return k.member.Load() }

// SetMember makes the commits carry m (nil: standalone).
func (k *Committer) SetMember(m *source.Member) { k.member.Store(m) }

// Commit commits offsets of topic's partitions with their metadata as
// Member. Under a hold, a
// commit refused because the hold's generation ended (source.ErrFenced: a
// process that joined at the same moment made the coordinator rebalance)
// is sent again as the member the hold joins as next: the group is still
// this run's. A hold that is lost, or ctx, ends it with the refusal.
func (k *Committer) Commit(ctx context.Context, topic string, offsets map[int32]int64, meta map[int32]Meta) error {
	return k.commitAs(ctx, k.Member(), topic, offsets, meta)
}

func (k *Committer) commitAs(ctx context.Context, m *source.Member, topic string, offsets map[int32]int64, meta map[int32]Meta) error {
	for {
		err := Commit(ctx, k.c, m, k.group, topic, offsets, meta)
		h := k.hold
		if err == nil || h == nil || m == nil || !errors.Is(err, source.ErrFenced) {
			return err
		}
		next := h.next(ctx, m)
		if next == nil {
			return err
		}
		h.logger().Warn().Err(err).Str("group", k.group).Int32("generation", next.Generation).
			Msg("the hold's generation ended under a commit: committing again as the hold's new generation")
		m = next
	}
}

// CommitPartition commits tp's offset with its metadata as Member, in one
// request with the other partitions' commits (Batcher).
func (k *Committer) CommitPartition(ctx context.Context, tp record.TopicPartition, next int64, meta Meta) error {
	return k.batch.Commit(ctx, k.Member(), tp, next, meta)
}

// Follow makes the commits carry the hold's member, and each new
// generation the hold joins, until stop; the hold logs to log. The
// context ends when the hold is lost. Without a hold the commits are
// standalone.
func (k *Committer) Follow(ctx context.Context, log zerolog.Logger) (context.Context, context.CancelFunc) {
	h := k.hold
	if h == nil {
		k.SetMember(nil)
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.lost, cancel)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = log
	h.follow = k.SetMember
	k.SetMember(h.member)
	return ctx, func() {
		stop()
		cancel()
		h.mu.Lock()
		h.follow = nil
		h.mu.Unlock()
	}
}

// HoldLost reports whether the run's hold ended before Release.
func (k *Committer) HoldLost() bool { return k.hold != nil && k.hold.lost.Err() != nil }

// HoldLostCause is why the hold ended (the failure to join the group
// again), nil while it lasts.
func (k *Committer) HoldLostCause() error {
	if !k.HoldLost() || errors.Is(context.Cause(k.hold.lost), context.Canceled) {
		return nil
	}
	return context.Cause(k.hold.lost)
}

// next returns the member the hold joined as after old, once it has: a
// commit as old was refused because its generation ended. nil when the
// hold is lost (or released) or ctx ends first, or after two minutes.
func (h *Hold) next(ctx context.Context, old *source.Member) *source.Member {
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		h.mu.Lock()
		m := h.member
		h.mu.Unlock()
		if m != old && m != nil {
			return m
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.lost.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
		}
	}
}

// commitLinger is the longest the commit batcher gathers the partitions'
// commits before it sends them in one OffsetCommit: at 1500 partitions one
// request per tick instead of one per partition. The gathering grows with
// the number of partitions the job runs (lingerPerCommit each after the
// first), so a few partitions wait a few milliseconds and a single one not
// at all (LingerFor).
const (
	commitLinger    = 50 * time.Millisecond
	lingerPerCommit = time.Millisecond
)

// Batcher coalesces the commits of a job's partitions into one
// OffsetCommit request per tick (commitLinger) to the group's coordinator.
// It sends one request at a time: commits that come while one is in flight
// go in the next. Each partition's committer waits for the answer of the
// request that carried its commit before it commits again, so a partition
// has at most one commit in flight, and a request carries at most one
// offset per partition: committed offsets never decrease (the committer
// never asks for less than it committed). Commits made as different group
// members (a rebalance between them), or of different topics, never share
// a request.
type Batcher struct {
	// Send commits offsets of topic's partitions with their metadata as m
	// (nil: standalone).
	Send func(ctx context.Context, m *source.Member, topic string, offsets map[int32]int64, meta map[int32]Meta) error
	// Linger is the gathering time before each request (LingerFor).
	Linger time.Duration

	mu      sync.Mutex
	pending []*pendingCommit
	running bool // a sender goroutine is active
	// requests counts the requests sent (for tests and figures).
	requests int
}

// LingerFor is the gathering time of a job running partitions partitions.
func LingerFor(partitions int) time.Duration {
	return min(commitLinger, time.Duration(max(partitions-1, 0))*lingerPerCommit)
}

// pendingCommit is one partition's commit waiting for its request.
type pendingCommit struct {
	member   *source.Member
	tp       record.TopicPartition
	next     int64
	meta     Meta
	deadline time.Time // zero: none
	done     chan error
}

// Commit queues tp's commit of next and waits for the answer of the
// request that carries it. It waits even after ctx ends (the request may
// be on its way): the request's own context ends at the latest deadline of
// the commits it carries, and a commit of unknown outcome settles before
// the answer comes back (source.RetryPolicy.SettleDelay).
func (b *Batcher) Commit(ctx context.Context, m *source.Member, tp record.TopicPartition, next int64, meta Meta) error {
	pc := &pendingCommit{member: m, tp: tp, next: next, meta: meta, done: make(chan error, 1)}
	pc.deadline, _ = ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	b.pending = append(b.pending, pc)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	return <-pc.done
}

// loop sends what is pending, one request at a time, until nothing is.
func (b *Batcher) loop() {
	for {
		if b.Linger > 0 {
			time.Sleep(b.Linger)
		}
		b.mu.Lock()
		batch := b.pending
		b.pending = nil
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.flush(batch)
	}
}

// flush sends batch: one request per member and topic (in practice one),
// each partition once.
func (b *Batcher) flush(batch []*pendingCommit) {
	for len(batch) > 0 {
		m, topic := batch[0].member, batch[0].tp.Topic
		var these, rest []*pendingCommit
		offsets, metas := map[int32]int64{}, map[int32]Meta{}
		var deadline time.Time
		none := false // a commit without a deadline: the request has none
		for _, pc := range batch {
			if _, dup := offsets[pc.tp.Partition]; pc.member != m || pc.tp.Topic != topic || dup {
				rest = append(rest, pc) // dup: cannot happen (a committer waits), kept for the next request
				continue
			}
			these = append(these, pc)
			offsets[pc.tp.Partition], metas[pc.tp.Partition] = pc.next, pc.meta
			none = none || pc.deadline.IsZero()
			if pc.deadline.After(deadline) {
				deadline = pc.deadline
			}
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if !none {
			ctx, cancel = context.WithDeadline(ctx, deadline)
		}
		b.mu.Lock()
		b.requests++
		b.mu.Unlock()
		err := b.Send(ctx, m, topic, offsets, metas)
		cancel()
		for _, pc := range these {
			pc.done <- err
		}
		batch = rest
	}
}
