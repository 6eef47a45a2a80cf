package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
)

// commitEvery is how often a partition writing to a sinks.Syncer (the file
// sink) syncs and commits: one fsync per second instead of one per batch.
const commitEvery = time.Second

// commitFunc stores next as a partition's checkpoint, with the sink's and
// the dead-letter sink's durable positions (sinks.Positioner; 0 when
// unknown). It is called only after both sinks made everything below next
// durable.
type commitFunc func(ctx context.Context, next, pos, deadPos int64) error

// committer owns one partition's durability rules: what was written, what
// was synced, what may be committed, and when. The partition worker tells
// it what it wrote (Wrote, WroteDeadLetters) and asks it to commit; the
// committer syncs the sink and the dead-letter sink (when they batch
// durability) before every commit, reads their positions and commits
// through an injected function. It is used by one goroutine.
//
// Rules:
//   - a commit always follows a successful sync of the sink (when it is a
//     sinks.Syncer) and of the dead-letter sink when dead letters were
//     written since its last sync (and once, so the trace CheckResume looks
//     for exists);
//   - a failed sync forbids committing past what was committed: the writes
//     since may be lost, and a later sync can succeed without them (fsync
//     after a writeback error);
//   - the committed offset never decreases.
type committer struct {
	topic     string
	partition int32
	// sinkName names the sink in errors ("sink file").
	sinkName string
	sink     sinks.Capabilities
	dead     sinks.Capabilities
	commit   commitFunc
	// timeout bounds one sync and commit; they run on their own context so
	// that an interrupted run still commits its in-flight batch.
	timeout time.Duration
	// retryBudget is the plan's retry.max_elapsed: a commit may retry that
	// long, whatever timeout says.
	retryBudget time.Duration
	// committed is the last committed offset (the next to read), read by
	// a run's progress while the partition runs.
	committed *atomic.Int64
	// uncommitted is the offset to commit next: everything below it was
	// written (not yet synced, for a sinks.Syncer); 0 when nothing is due.
	uncommitted int64
	// written counts the records the sink made durable (State.Written);
	// unsynced those a sinks.Syncer took since its last sync, added to
	// written once a sync makes them durable, dropped when one fails.
	written  *atomic.Int64
	unsynced int64
	// deadUnsynced is true when dead letters were written since the
	// dead-letter sink's last sync; deadSynced once it was synced at all.
	deadUnsynced, deadSynced bool
	last                     time.Time // last commit (or the start)
	// behind is the commit running behind the worker (CommitBehind),
	// nil when none: at most one is in flight.
	behind *behindCommit
}

// behindCommit is a commit of next sent by CommitBehind; done receives its
// answer once.
type behindCommit struct {
	next int64
	done chan error
}

// Wrote records that everything below next is written to the sinks
// (records, dead letters) or needs no write (markers, aborted data).
func (c *committer) Wrote(next int64) { c.uncommitted = next }

// WroteRecords records that the sink took n records: durable now, or
// at the next sync for a sinks.Syncer.
func (c *committer) WroteRecords(n int64) {
	if c.sink.Syncer == nil {
		c.written.Add(n)
		return
	}
	c.unsynced += n
}

// WroteDeadLetters records that dead letters were written: the next
// commit syncs the dead-letter sink first.
func (c *committer) WroteDeadLetters() { c.deadUnsynced = true }

// Committed is the last committed offset.
func (c *committer) Committed() int64 { return c.committed.Load() }

// Committable is the offset the next commit would store.
func (c *committer) Committable() int64 { return max(c.uncommitted, c.committed.Load()) }

// Since is how long ago the last commit was (or the committer started).
func (c *committer) Since(now time.Time) time.Duration { return now.Sub(c.last) }

// Due reports whether a write should be committed at once: always for a
// sink durable on Write, every commitEvery for a sinks.Syncer and for a
// sink whose transactions commit the group's offsets (sinks.OffsetCommitter:
// each batch's transaction holds the offset after its records already; an
// advance past the markers after them would cost a transaction of its own
// per batch).
func (c *committer) Due(now time.Time) bool {
	return c.CommitsBehind() || c.Since(now) >= commitEvery
}

// Commit commits what was written and not yet committed, if anything,
// after the commit running behind (CommitBehind) was answered.
func (c *committer) Commit() error {
	if err := c.wait(); err != nil {
		return err
	}
	if c.uncommitted <= c.committed.Load() {
		return nil
	}
	return c.CommitAt(c.uncommitted)
}

// CommitsBehind reports whether the worker may go on writing while a
// commit is in flight (CommitBehind): the sink is durable on Write, so
// each Write's records are durable before their commit is sent, and the
// runner commits the group's offsets (no sinks.Syncer, no
// sinks.OffsetCommitter, whose syncs and transactions run on the
// partition's sink as its Writes do).
func (c *committer) CommitsBehind() bool { return c.sink.Syncer == nil && c.sink.Offsets == nil }

// CommitBehind commits what was written without waiting for the answer,
// so that the partition's next Write overlaps the OffsetCommit round trip
// (and the commit batcher's gathering). Only for a sink durable on Write
// (CommitsBehind): everything below the offset it sends is durable when it
// is called. The dead-letter sink's sync and the positions are read before
// it returns, as CommitAt does. At most one commit is in flight: while it
// is, CommitBehind only collects its answer when it came, and the offsets
// written since go in the next commit (this call's or a later one's; Commit
// and CommitAt wait for the one in flight first). The error is that of the
// commit before, answered since the last call, or of the sync.
func (c *committer) CommitBehind() error {
	if b := c.behind; b != nil {
		select {
		case err := <-b.done:
			c.behind = nil
			if err := c.settle(b.next, err); err != nil {
				return err
			}
		default:
			return nil // in flight: the next commit carries what is written since
		}
	}
	if c.uncommitted <= c.committed.Load() {
		return nil
	}
	next, send, err := c.prepare(c.uncommitted)
	if err != nil {
		return err
	}
	b := &behindCommit{next: next, done: make(chan error, 1)}
	c.behind, c.last = b, time.Now()
	go func() { b.done <- send() }()
	return nil
}

// wait waits for the commit in flight (CommitBehind), if any, and settles
// it.
func (c *committer) wait() error {
	b := c.behind
	if b == nil {
		return nil
	}
	c.behind = nil
	return c.settle(b.next, <-b.done)
}

// CommitAt syncs the sinks and stores next (never below what is
// committed) as the partition's checkpoint, after the commit in flight
// (CommitBehind) was answered. Errors are *source.PartitionError.
func (c *committer) CommitAt(next int64) error {
	if err := c.wait(); err != nil {
		return err
	}
	next, send, err := c.prepare(next)
	if err != nil {
		return err
	}
	return c.settle(next, send())
}

// prepare syncs the sinks and reads their positions for a commit of next
// (never below what is committed); send makes the commit and may run on
// another goroutine (it touches no state of c).
func (c *committer) prepare(next int64) (int64, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.sync(ctx); err != nil {
		// The writes since the last commit may be lost, and a later Sync can
		// succeed without them: no deferred commit may pass them.
		c.uncommitted, c.unsynced = 0, 0
		return 0, nil, &source.PartitionError{Topic: c.topic, Partition: c.partition, Offset: c.committed.Load(), Err: err}
	}
	c.written.Add(c.unsynced)
	c.unsynced = 0
	next = max(next, c.committed.Load())
	var pos, deadPos int64
	if p := c.sink.Positioner; p != nil {
		pos = p.SyncedPosition(c.partition) // what the sync above made durable
	}
	if p := c.dead.Positioner; p != nil {
		deadPos = p.SyncedPosition(c.partition)
	}
	// The commit rides out the source cluster's bad minutes: its retries
	// (source.RetryPolicy) may take the plan's retry budget.
	timeout := max(c.timeout, c.retryBudget+source.DefaultRequestTimeout)
	commit, partition, oc := c.commit, c.partition, c.sink.Offsets
	send := func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), timeout)
		defer ccancel()
		if oc != nil {
			// The sink's transactions commit the group's offsets where the
			// runner would: a standalone commit of a stalled process could
			// move them back past another process's.
			return oc.CommitOffset(cctx, partition, next)
		}
		return commit(cctx, next, pos, deadPos)
	}
	return next, send, nil
}

// settle records the answer err to the commit of next.
func (c *committer) settle(next int64, err error) error {
	if err != nil {
		// Everything below next is durable (the sync succeeded), and the
		// failed commit may still have landed: a later commit of this
		// partition must not store less.
		c.uncommitted = max(c.uncommitted, next)
		perr := &source.PartitionError{Topic: c.topic, Partition: c.partition, Offset: c.committed.Load(), Err: err}
		if _, ok := errors.AsType[*source.RetryError](err); ok {
			return fault.With(perr, fault.HintResume)
		}
		return perr
	}
	c.committed.Store(max(next, c.committed.Load()))
	c.last = time.Now()
	return nil
}

// sync makes what was written for the partition durable in the sink and
// the dead-letter sink, for those that batch durability (sinks.Syncer).
func (c *committer) sync(ctx context.Context) error {
	if c.sink.Syncer != nil {
		if err := c.sink.Syncer.Sync(ctx, c.partition); err != nil {
			return fmt.Errorf("%s: sync: %w", c.sinkName, err)
		}
	}
	// The dead-letter sink only when dead letters were written since its
	// last sync (and once, for the trace CheckResume looks for).
	if dl := c.dead.Syncer; dl != nil && (c.deadUnsynced || !c.deadSynced) {
		if err := dl.Sync(ctx, c.partition); err != nil {
			return fmt.Errorf("dead-letter sink: sync: %w", err)
		}
		c.deadUnsynced, c.deadSynced = false, true
	}
	return nil
}
