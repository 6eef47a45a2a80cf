package worker

import (
	"cmp"
	"context"
	"errors"
	"sort"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
)

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
	w.throttle.join(1)
	defer w.throttle.join(-1)
	w.pf = source.Prefetch(ctx, r)
	defer w.pf.Stop() // before the deferred report reads r.Stats
	defer func() {
		if !w.committedAtFailure {
			err = cmp.Or(err, w.commits.Commit())
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
		return &source.PartitionError{Topic: w.state.Topic, Partition: w.state.Partition, Offset: w.pos, Err: errors.New("the fetch loop stopped before the end of the range")}
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
	due := w.pos >= w.state.End || w.commits.Since(time.Now()) > cmp.Or(w.throttle.MaxWait(), flushAfter)
	starved := w.starved
	w.starved = false
	switch {
	case len(w.pending) > 0 && (due || starved):
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
	out, stop, err := w.applyPipeline(w.window(chunk))
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
		commitAt = stop.rec.Offset // on_error: fail: commit up to the record, then stop at it
	}
	w.state.Read.Add(int64(processed))
	if err := w.writeDeadLetters(); err != nil {
		return err
	}
	if stop != nil {
		if err := w.commits.CommitAt(commitAt); err != nil {
			return err
		}
		return stop.partitionError(w.state.Topic)
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
	last, before := w.pending[n-1].Offset, len(w.pending)
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
	if !partitionFailed[*source.DataLossError](err) && !budget {
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
