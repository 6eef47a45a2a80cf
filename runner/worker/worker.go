package worker

import (
	"context"
	"time"

	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

// shared is a Policy with what its workers build from it once: the throttle,
// the dead-letter key stage and the max_errors budget.
type shared struct {
	*Policy
	throttle *Throttle
	deadKey  pipeline.Key
	budget   *errorBudget
}

// Worker replays one partition's range: it reads it (source.Reader and
// its prefetcher), cuts batches, runs the window and the record pipeline,
// hands the records to the sink under the throttle and the error policy
// (on_error, max_errors), and commits what the sinks made durable through
// its committer. It is used by one goroutine.
type Worker struct {
	*shared
	state  *State
	reader *source.Reader
	log    zerolog.Logger
	// pending holds fetched records not yet written.
	pending []record.Record
	// pipe is the partition's record pipeline (decode, filter, mapping,
	// key), run on each record before the sink's Write.
	pipe *pipeline.Run
	// dead holds the current batch's dead letters (on_error: dead_letter).
	dead []record.Record
	// pos is the reader's position after the last response received.
	pos int64
	// commits owns what is written, synced and committed.
	commits *committer
	// pf is the partition's prefetcher, and held the arena chunks of the
	// responses whose records are pending, oldest first: each is given back
	// to pf once its last record is written.
	pf   *source.Prefetcher
	held []heldChunks
	// starved: the reader waits for memory (source.FetchBudget), so the
	// records pending are written without waiting for a full batch.
	starved bool
	// runCtx is the run's context: once it is cancelled (a signal), a
	// failing sink is not retried (retry).
	runCtx context.Context
	// committedAtFailure: commitBeforeFailure made the partition's last
	// commit, so Run does not make it again (a commit that failed would
	// spend its retry budget twice).
	committedAtFailure bool
}

// newWorker builds the worker of s's partition: its reader (the plan's
// isolation, data-loss and open-transaction policy), its pipeline and its
// committer, which commits through r.Commit.
func newWorker(r *shared, s *State, pipe *pipeline.Run) *Worker {
	p := r.Plan
	w := &Worker{shared: r, state: s, pipe: pipe}
	w.log = r.Log.With().Str("plan", p.Name).Str("topic", s.Topic).Int32("partition", s.Partition).Logger()
	w.reader = r.Source.NewReader(source.ReaderConfig{Topic: s.Topic, Partition: s.Partition, Isolation: p.Source.Isolation,
		Start: s.From, End: s.End, AllowLoss: p.AllowDataLoss, Log: &w.log,
		WaitOpenTransactions: true, OpenTransactionTimeout: time.Duration(p.Source.OpenTransactionTimeout)})
	w.commits = &committer{topic: s.Topic, partition: s.Partition, sinkName: "sink " + string(p.Sink.Type),
		sink: r.Sink.Capabilities(), dead: sinks.CapabilitiesOf(r.DeadLetters), timeout: r.FlushTimeout, committed: &s.Next, written: &s.Written,
		retryBudget: time.Duration(p.Retry.MaxElapsed),
		commit: func(ctx context.Context, next, pos, deadPos int64) error {
			if err := r.Commit(ctx, s, next, pos, deadPos); err != nil {
				return err
			}
			s.Pos.Store(pos)
			s.DeadPos.Store(deadPos)
			return nil
		}}
	return w
}

// heldChunks are the arena chunks of one response and the offset of its
// last record.
type heldChunks struct {
	last   int64
	chunks [][]byte
}
