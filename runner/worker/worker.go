package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

// Policy is what the partition workers of one run share: the plan, the
// sinks, the source cluster the readers fetch from, and how a partition's
// commit reaches the replay group.
type Policy struct {
	Plan *plan.Plan
	// Topic is the topic read; From and To are the time window's bounds
	// (From zero: no time window; To zero: none at the end).
	Topic    string
	From, To time.Time
	// Decoder decodes the records' framed keys and values (the plan's
	// decode: section); nil when the plan decodes nothing.
	Decoder *decode.Decoder
	// Sink receives the records; DeadLetters the records that cannot be
	// processed under on_error: dead_letter (nil otherwise).
	Sink, DeadLetters sinks.Sink
	// Source is the cluster the partitions are read from.
	Source *source.Cluster
	// Limit is the throttle the run's partitions share (the plan's, or a
	// joined member's share of it).
	Limit plan.Throttle
	// Retry tunes the backoff of sink writes failing with a transient
	// error; FlushTimeout bounds one write, sync and commit.
	Retry        Backoff
	FlushTimeout time.Duration
	Log          zerolog.Logger
	// Commit stores next as s's checkpoint in the replay group, with the
	// sinks' durable positions (sinks.Positioner; 0 when unknown). It is
	// called only after both sinks made everything below next durable.
	Commit func(ctx context.Context, s *State, next, pos, deadPos int64) error
}

// run is a Policy with what its workers build from it once: the throttle,
// the dead-letter key stage and the max_errors budget.
type run struct {
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
	*run
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
	// commit, so run does not make it again (a commit that failed would
	// spend its retry budget twice).
	committedAtFailure bool
}

// newWorker builds the worker of s's partition: its reader (the plan's
// isolation, data-loss and open-transaction policy), its pipeline and its
// committer, which commits through r.Commit.
func newWorker(r *run, s *State, pipe *pipeline.Run) *Worker {
	p := r.Plan
	w := &Worker{run: r, state: s, pipe: pipe}
	w.log = r.Log.With().Str("plan", p.Name).Str("topic", r.Topic).Int32("partition", s.Partition).Logger()
	w.reader = r.Source.NewReader(source.ReaderConfig{Topic: r.Topic, Partition: s.Partition, Isolation: p.Source.Isolation,
		Start: s.From, End: s.End, AllowLoss: p.AllowDataLoss, Log: &w.log,
		WaitOpenTransactions: true, OpenTransactionTimeout: time.Duration(p.Source.OpenTransactionTimeout)})
	w.commits = &committer{topic: r.Topic, partition: s.Partition, sinkName: "sink " + string(p.Sink.Type),
		sink: r.Sink.Capabilities(), dead: sinks.CapabilitiesOf(r.DeadLetters), timeout: r.FlushTimeout, committed: &s.Next,
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

// hold takes over f's records and chunks: the records are appended to
// pending and the slice is reused; the chunks wait until the records are
// written.
func (w *Worker) hold(f source.Fetched) {
	if len(f.Recs) == 0 {
		w.pf.Release(f.Chunks)
		return
	}
	w.held = append(w.held, heldChunks{last: f.Recs[len(f.Recs)-1].Offset, chunks: f.Chunks})
	if w.pending == nil {
		w.pending = f.Recs // taken over; it goes back to the reader once written (flush)
		return
	}
	w.pending = append(w.pending, f.Recs...)
	w.pf.Reuse(f.Recs) // the reader fills it again: last use of f.Recs
}

// releaseThrough gives back the chunks of the responses whose records are
// all at or below offset, once those were written.
func (w *Worker) releaseThrough(offset int64) {
	i := 0
	for ; i < len(w.held) && w.held[i].last <= offset; i++ {
		w.pf.Release(w.held[i].chunks)
		w.held[i] = heldChunks{}
	}
	w.held = append(w.held[:0], w.held[i:]...)
}

// flushAfter writes a partial batch of a slow partition after this long;
// under a throttle, its max_batch_wait instead.
const flushAfter = time.Second

// flushWait is how long a partial batch may wait: flushAfter, or the
// throttle's max_batch_wait.
func (w *Worker) flushWait() time.Duration {
	if d := w.throttle.MaxWait(); d > 0 {
		return d
	}
	return flushAfter
}

// Run replays the partition from State.From to State.End, or until ctx
// ends (the in-flight batch is written and committed first) or the
// partition fails.
func (w *Worker) Run(ctx context.Context) (err error) {
	w.runCtx = ctx
	s := w.state
	s.Started, w.commits.last = time.Now(), time.Now()
	s.Next.Store(s.From)
	r := w.reader
	defer func() {
		s.Elapsed = time.Since(s.Started)
		st := r.Stats()
		s.Aborted, s.Lost = st.Aborted, st.Lost
		if err != nil && !errors.Is(err, context.Canceled) {
			s.Err = err
			w.log.Error().Err(err).Int64("offset", s.Next.Load()).Msg("partition failed")
		}
	}()
	w.log.Debug().Int64("from", s.From).Int64("end", s.End).Msg("partition started")
	w.throttle.join()
	defer w.throttle.leave()
	pf := source.Prefetch(ctx, r)
	w.pf = pf
	defer pf.Stop() // before the deferred report reads r.Stats
	defer func() {
		if !w.committedAtFailure {
			cerr := w.commits.Commit()
			if err == nil {
				err = cerr
			}
		}
		s.Uncommitted.Store(w.commits.Committable() > w.commits.Committed())
	}()
	w.pos = s.From
	for w.pos < s.End {
		if err := w.receive(ctx); err != nil {
			return err
		}
		if err := w.flushDue(ctx, w.Plan.Sink.BatchSize); err != nil {
			return err
		}
	}
	if err := w.commits.Commit(); err != nil {
		return err
	}
	s.Done.Store(true)
	w.log.Debug().Int64("written", s.Written.Load()).Msg("partition done")
	return nil
}

// receive waits for the next response of the fetch loop and takes its
// records over (pending); the reader's position moves past it.
func (w *Worker) receive(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var f source.Fetched
	var ok bool
	select {
	case f, ok = <-w.pf.C():
	case <-ctx.Done():
		return ctx.Err()
	}
	if !ok { // the fetch loop ended without reaching the end: only on cancellation
		if err := ctx.Err(); err != nil {
			return err
		}
		return &source.PartitionError{Topic: w.Topic, Partition: w.state.Partition, Offset: w.pos, Err: errors.New("the fetch loop stopped before the end of the range")}
	}
	w.starved = w.starved || f.Starved
	w.hold(f)
	w.pos = f.Next
	if f.Err != nil {
		return w.failLost(ctx, f.Err)
	}
	return nil
}

// flushDue writes every full batch pending, and what is left once the
// range is done or after flushAfter; with nothing pending, markers or
// aborted data read since the last commit become committable then.
func (w *Worker) flushDue(ctx context.Context, batch int) error {
	for len(w.pending) >= batch {
		if err := w.flush(ctx, batch); err != nil {
			return err
		}
	}
	due := w.pos >= w.state.End || w.commits.Since(time.Now()) > w.flushWait()
	if w.starved {
		w.starved = false
		if len(w.pending) > 0 {
			if err := w.flush(ctx, len(w.pending)); err != nil {
				return err
			}
			return nil
		}
	}
	switch {
	case len(w.pending) > 0 && due:
		return w.flush(ctx, len(w.pending))
	case len(w.pending) == 0 && w.pos > w.commits.Committable() && due:
		w.commits.Wrote(w.pos) // only markers or aborted data since the last commit
	}
	if w.commits.CommitsBehind() {
		// What the last batch left for the commit in flight goes out once
		// that one is answered, without waiting for another batch.
		return w.commits.CommitBehind()
	}
	return nil
}

// flush writes the first n pending records, in writes the throttle cuts
// (each waits for its tokens right before it reaches the sink; one write
// without a throttle), and commits past them (flushChunk).
func (w *Worker) flush(ctx context.Context, n int) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err // interrupted: only the in-flight write is finished
		}
		k, err := w.throttle.Take(ctx, w.pending[:n])
		if err != nil {
			return err // nothing written: the records are read again on resume
		}
		if err := w.flushChunk(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// flushChunk writes the first n pending records and commits past them: to
// the reader's position when they are all that is pending (so markers and
// aborted data after them are committed too), else to after the last one.
func (w *Worker) flushChunk(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err // interrupted: only the in-flight batch is finished
	}
	chunk := w.pending[:n]
	commitAt := chunk[n-1].Offset + 1
	if n == len(w.pending) {
		commitAt = w.pos
	}
	out := w.window(chunk)
	out, stop, err := w.applyPipeline(out)
	if err != nil {
		return err // max_errors: nothing of this batch is committed
	}
	failed, err := w.write(out)
	if err != nil {
		return err
	}
	if failed != nil {
		stop = failed // the sink refused a record before the filter's failure, if any
	}
	// Read counts records taken through the window, the filter and the
	// sink (up to a record that stops the partition), not records fetched
	// ahead and still pending: after a stop it says how far the run got.
	processed := n
	if stop != nil {
		processed = sort.Search(n, func(i int) bool { return chunk[i].Offset > stop.rec.Offset })
	}
	w.state.Read.Add(int64(processed))
	if stop != nil {
		commitAt = stop.rec.Offset // on_error: fail: commit up to the record, then stop at it
	}
	if err := w.writeDeadLetters(); err != nil {
		return err
	}
	if stop != nil {
		if err := w.commits.CommitAt(commitAt); err != nil {
			return err
		}
		return stop.partitionError(w.Topic)
	}
	w.commits.Wrote(commitAt)
	// Under a throttle a partition commits at least every max_batch_wait,
	// also into a sink that batches durability.
	switch now := time.Now(); {
	case w.commits.CommitsBehind():
		// Durable on Write: the commit goes out while the next batch is
		// written (one in flight).
		if err := w.commits.CommitBehind(); err != nil {
			return err
		}
	case w.commits.Due(now) || w.throttle != nil && w.commits.Since(now) >= w.throttle.MaxWait():
		if err := w.commits.Commit(); err != nil {
			return err
		}
	}
	last := w.pending[n-1].Offset
	before := len(w.pending)
	w.pending = append(w.pending[:0], w.pending[n:]...)
	clear(w.pending[len(w.pending):before]) // no stale record keeps a released chunk alive
	if len(w.pending) == 0 {
		// Between batches a partition holds no slice: with thousands of
		// partitions, batch-sized slices would outgrow the fetch budget.
		w.pf.Reuse(w.pending)
		w.pending = nil
	}
	w.releaseThrough(last) // written and committed (or due): no longer used
	return nil
}

// window applies the time window to records: it counts records stamped
// outside it and, with strict_timestamps or skew_margin, drops them.
func (w *Worker) window(chunk []record.Record) []record.Record {
	win := w.Plan.Window
	if w.From.IsZero() {
		return chunk
	}
	strict := win.StrictTimestamps || win.SkewMargin > 0
	out := chunk[:0:0]
	if !strict {
		out = chunk
	}
	var dropped int64 // counted once per batch: skip takes a lock
	for _, rec := range chunk {
		inside := !rec.Time.Before(w.From) && (w.To.IsZero() || rec.Time.Before(w.To))
		switch {
		case inside && strict:
			out = append(out, rec)
		case !inside && strict:
			dropped++
		case !inside:
			w.state.Outside++
		}
	}
	if dropped > 0 {
		w.state.skip("outside-window", dropped)
	}
	return out
}

// commitBeforeFailure commits what the partition wrote before a sink
// failure, as the partition does when it stops (run's deferred Commit),
// after the commit in flight (CommitBehind) is answered: the failure's
// message then names the offset the group holds once the run has stopped,
// not one from before those commits landed. It returns the committed
// offset and the commit's error. The partition stops after it: run does
// not commit again.
func (w *Worker) commitBeforeFailure() (int64, error) {
	w.committedAtFailure = true
	err := w.commits.Commit()
	return w.state.Next.Load(), err
}

// write hands records to the sink with the durable-write contract,
// retrying transient failures (sinks.Transient). A record the sink cannot
// take follows on_error: skipped or dead-lettered, the others are written
// again without it; under on_error: fail, the records before it are
// written and it is returned.
func (w *Worker) write(recs []record.Record) (*failure, error) {
	for len(recs) > 0 {
		err := w.retry("sink", w.Sink, time.Duration(w.Plan.Sink.Retry.MaxElapsed), func(ctx context.Context) error { return w.Sink.Write(ctx, recs) })
		if err == nil {
			w.state.Written.Add(int64(len(recs)))
			return nil, nil
		}
		var re *record.Error
		if !errors.As(err, &re) {
			advice := "fix the sink and re-run the same command to resume"
			if errors.Is(err, sinks.ErrFenced) {
				// Re-running now would fence the process that runs.
				advice = "the process that fenced this one carries on: let it finish (replay status shows its progress), and re-run only if it fails"
			}
			next, cerr := w.commitBeforeFailure()
			if cerr != nil && !errors.Is(err, sinks.ErrFenced) {
				advice = fmt.Sprintf("committing the batches before it failed too (%v); %s", cerr, advice)
			}
			perr := &source.PartitionError{Topic: w.Topic, Partition: w.state.Partition, Offset: next,
				Err: fmt.Errorf("sink %s: %w; nothing past offset %d is committed: %s", w.Plan.Sink.Type, err, next, advice)}
			if re := (*SinkRetryError)(nil); errors.As(err, &re) {
				return nil, fault.With(perr, fault.HintSinkResume)
			}
			return nil, perr
		}
		i := slices.IndexFunc(recs, func(r record.Record) bool { return r.Offset == re.Offset })
		if i < 0 {
			return nil, fmt.Errorf("sink %s rejected offset %d, which is not in the batch: %w", w.Plan.Sink.Type, re.Offset, err)
		}
		f, err := w.unprocessable(&recs[i], reasonOf(err), err)
		switch {
		case err != nil:
			return nil, err
		case f != nil:
			if earlier, err := w.write(recs[:i]); earlier != nil || err != nil {
				return earlier, err
			}
			return f, nil
		}
		recs = slices.Delete(slices.Clone(recs), i, i+1)
	}
	return nil, nil
}

// failLost ends a partition whose read failed: records deleted under the
// reader, the source cluster failing for longer than the retry budget, or
// an open transaction holding the partition for longer than
// source.open_transaction_timeout.
// The records already fetched are written and committed first (after a
// data loss they exist nowhere else any more): the checkpoint then stands
// exactly at the offset the error names, which a resume starts from.
func (w *Worker) failLost(ctx context.Context, err error) error {
	var re *source.RetryError
	var ote *source.OpenTransactionError
	budget := errors.As(err, &re) || errors.As(err, &ote)
	if !isDataLoss(err) && !budget {
		return err
	}
	var ferr error
	if len(w.pending) > 0 {
		ferr = w.flush(ctx, len(w.pending))
	}
	if ferr == nil {
		ferr = w.commits.Commit()
	}
	if ferr != nil {
		return errors.Join(err, ferr)
	}
	if pe, ok := err.(*source.PartitionError); ok && budget {
		// The reader's position may be past what the sink holds; the
		// commit above stores exactly what it holds.
		hint := fault.HintResume
		if ote != nil {
			hint = fault.HintOpenTransaction
		}
		return fault.With(&source.PartitionError{Topic: pe.Topic, Partition: pe.Partition, Offset: w.commits.Committed(), Err: pe.Err}, hint)
	}
	return err
}
