package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
)

// Run replays the job's ranges into sink. Every partition is read by its
// own goroutine from its start (or checkpoint) to its end, throttled, and
// written in batches; after each batch the sink made durable, the next
// offset is committed to the replay group with the plan fingerprint and the
// range end as metadata. When every partition is done, sink.Finish
// publishes the output.
//
// A run refused or failing before it reads anything (the sink cannot
// resume, a commit fails) returns a nil *Report. Cancelling ctx stops the
// run after the in-flight batch is written and committed; Run then returns
// an error wrapping ErrInterrupted. A failing
// partition stops the others the same way and Run returns its
// *PartitionError; nothing is ever committed past what the sink holds.
func (j *Job) Run(ctx context.Context, sink sinks.Sink) (*Report, error) {
	rep := j.newReport()
	work := context.WithoutCancel(ctx)
	closeDeadLetters, err := j.openDeadLetters(work)
	if err != nil {
		return nil, err
	}
	defer closeDeadLetters()
	if err := j.checkResume(sink); err != nil {
		return nil, err
	}
	if j.Fresh {
		if err := j.dropDiscarded(work); err != nil {
			return nil, err
		}
	}
	if err := j.syncStarts(work, sink); err != nil {
		return nil, err
	}
	if err := j.commitStarts(work); err != nil {
		return nil, err
	}
	states := make([]*partitionState, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		states[i] = &partitionState{Range: r, from: j.from(r)}
	}
	if err := j.resumeFromSink(work, sink, states); err != nil {
		return nil, err
	}
	j.live.Store(&liveRun{started: rep.Started, states: states}) // for Job.Progress
	rep.NothingToDo = j.NothingToDo()
	j.startBudget(states)
	err = j.readAll(ctx, sink, states)
	for _, s := range states {
		rep.Partitions = append(rep.Partitions, s.report())
	}
	rep.Added = j.addedSince(work)
	rep.Finished = j.opts.Now().UTC()
	if err != nil {
		return rep, err
	}
	return rep, j.publish(work, sink, rep)
}

// startBudget counts max_errors against the records of states.
func (j *Job) startBudget(states []*partitionState) {
	var records int64
	for _, s := range states {
		records += max(s.End-s.from, 0)
	}
	j.budget = newErrorBudget(j.Plan.MaxErrors, records)
}

// publish finishes the sink and the dead-letter sink once every partition
// is done (Sink.Finish: a file sink publishes its staging) and marks rep
// published.
func (j *Job) publish(work context.Context, sink sinks.Sink, rep *Report) error {
	fctx, cancel := context.WithTimeout(work, j.opts.FlushTimeout)
	defer cancel()
	const again = "every record is staged and committed: fix the cause and re-run the same command to publish"
	if err := sink.Finish(fctx); err != nil {
		return fmt.Errorf("publish sink output: %w (%s)", err, again)
	}
	if j.DeadLetters != nil {
		if err := j.DeadLetters.Finish(fctx); err != nil {
			return fmt.Errorf("publish the dead letters: %w (%s)", err, again)
		}
	}
	rep.Published = true
	return nil
}

// newReport starts the report of a run of the job, now.
func (j *Job) newReport() *Report {
	return &Report{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Topic: j.Resolution.Topic, Group: j.Plan.Group,
		Sink: j.Plan.Sink.Type, Started: j.opts.Now().UTC(), Ignored: j.Ignored, From: j.Resolution.From, To: j.Resolution.To}
}

// commitStarts pins the ranges in the group before anything is read: each
// partition's start offset (its checkpoint on a resume) with the range as
// metadata. A later run finds the same ranges there, and the standalone
// commit fences off a group that got live members since Prepare, fresh or
// resumed, before anything reaches the sink.
func (j *Job) commitStarts(ctx context.Context) error {
	offsets := map[int32]int64{}
	meta := map[int32]checkpointMeta{}
	for _, r := range j.Resolution.Ranges {
		offsets[r.Partition] = j.from(r)
		m := j.meta(r)
		if _, ok := j.committed[r.Partition]; ok {
			// What the sinks held at that commit, and still hold (a start
			// moved past lost offsets adds nothing to the staging).
			m.Pos, m.DPos = j.positions[r.Partition], j.dlPositions[r.Partition]
		}
		meta[r.Partition] = m
	}
	if err := j.c.commit(ctx, j.Plan.Group, j.Resolution.Topic, offsets, meta); err != nil {
		return fmt.Errorf("pin the resolved ranges in group %s: %w", j.Plan.Group, err)
	}
	return nil
}

// dropDiscarded deletes the checkpoints of a run discarded by Restart on
// partitions outside the new ranges (commitStarts overwrites the others).
func (j *Job) dropDiscarded(ctx context.Context) error {
	var parts []int32
	for _, part := range j.discarded {
		if !slices.ContainsFunc(j.Resolution.Ranges, func(r Range) bool { return r.Partition == part }) {
			parts = append(parts, part)
		}
	}
	if err := j.c.deleteCommits(ctx, j.Plan.Group, j.Resolution.Topic, parts); err != nil {
		return fmt.Errorf("discard the earlier run's checkpoints in group %s: %w", j.Plan.Group, err)
	}
	return nil
}

func (j *Job) meta(r Range) checkpointMeta {
	return checkpointMeta{Tool: metaTool, Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Start: r.Start, End: r.End}
}

func (j *Job) readAll(ctx context.Context, sink sinks.Sink, states []*partitionState) error {
	log := j.opts.Log
	throttle := NewThrottle(j.Plan.Throttle.RecordsPerSecond, int64(j.Plan.Throttle.BytesPerSecond))
	prog, err := j.Plan.FilterProgram()
	if err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	var lost partitionErrors // data loss stops one partition, not the run
	for _, s := range states {
		if s.from >= s.End {
			s.next.Store(s.from)
			s.done.Store(true)
			continue
		}
		pl := log.With().Str("plan", j.Plan.Name).Str("topic", j.Resolution.Topic).Int32("partition", s.Partition).Logger()
		w := &partitionWorker{job: j, sink: sink, throttle: throttle, state: s, log: pl}
		w.commits = j.newCommitter(sink, s)
		if prog != nil {
			w.filter = filter.New(prog)
		}
		g.Go(func() error { return lost.keep(w.run(gctx)) })
	}
	stopProgress := j.progress(states)
	err = g.Wait()
	stopProgress()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: the in-flight batches were written and committed; re-run the same command to resume", ErrInterrupted)
	}
	return lost.join(err)
}

// progress logs totals every ProgressEvery (none when it is negative)
// until the returned func is called.
func (j *Job) progress(states []*partitionState) func() {
	if j.opts.ProgressEvery < 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(j.opts.ProgressEvery)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := snapshot(start, states)
				el := time.Since(start).Seconds()
				j.opts.Log.Info().Int64("written", p.Written).Int64("offsets_done", p.Replayed).Int64("offsets_total", p.Offsets).
					Float64("records_per_second", float64(p.Written)/el).Msg("progress")
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// partitionState is one partition's live counters; the worker owns it.
// Job.Progress reads next, written, read, done and skipped while it runs.
type partitionState struct {
	Range
	from          int64
	next, written atomic.Int64
	read          atomic.Int64
	skipped       map[string]int64 // guarded by mu
	unprocessed   map[string]int64 // records that cannot be processed, by reason
	aborted       int64
	outside       int64
	lost          []Gap // offsets deleted under the reader
	started       time.Time
	elapsed       time.Duration
	done          atomic.Bool
	err           error

	mu sync.Mutex
}

func (s *partitionState) skip(reason string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped == nil {
		s.skipped = map[string]int64{}
	}
	s.skipped[reason] += n
}

// skips returns a copy of the skipped counts (nil when there are none).
func (s *partitionState) skips() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.skipped)
}

func (s *partitionState) unprocessable(reason string) {
	if s.unprocessed == nil {
		s.unprocessed = map[string]int64{}
	}
	s.unprocessed[reason]++
}

func (s *partitionState) report() PartitionReport {
	r := PartitionReport{Partition: s.Partition, Outcome: s.Outcome, Start: s.Start, End: s.End, From: s.from,
		Next: max(s.next.Load(), s.from), Read: s.read.Load(), Written: s.written.Load(), Skipped: s.skips(), Errors: s.unprocessed, Aborted: s.aborted,
		OutsideWindow: s.outside, Detail: s.Detail, DurationMS: s.elapsed.Milliseconds(), Done: s.done.Load()}
	r.Lost, r.LostRanges = s.lostOffsets()
	if s.err != nil {
		r.Error = s.err.Error()
	}
	return r
}

type partitionWorker struct {
	job      *Job
	sink     sinks.Sink
	throttle *Throttle
	state    *partitionState
	log      zerolog.Logger
	// pending holds fetched records not yet written.
	pending []record.Record
	// filter is the plan's filter; nil without one (no cost per record).
	filter *filter.Filter
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
	// runCtx is the run's context: once it is cancelled (a signal), a
	// failing sink is not retried (retry).
	runCtx context.Context
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
func (w *partitionWorker) hold(f source.Fetched) {
	if len(f.Recs) == 0 {
		w.pf.Release(f.Chunks)
		return
	}
	w.pending = append(w.pending, f.Recs...)
	w.held = append(w.held, heldChunks{last: f.Recs[len(f.Recs)-1].Offset, chunks: f.Chunks})
	w.pf.Reuse(f.Recs) // the reader fills it again: last use of f.Recs
}

// releaseThrough gives back the chunks of the responses whose records are
// all at or below offset, once those were written.
func (w *partitionWorker) releaseThrough(offset int64) {
	i := 0
	for ; i < len(w.held) && w.held[i].last <= offset; i++ {
		w.pf.Release(w.held[i].chunks)
		w.held[i] = heldChunks{}
	}
	w.held = append(w.held[:0], w.held[i:]...)
}

// flushAfter writes a partial batch of a slow partition after this long.
const flushAfter = time.Second

func (w *partitionWorker) run(ctx context.Context) (err error) {
	w.runCtx = ctx
	s, j := w.state, w.job
	s.started, w.commits.last = time.Now(), time.Now()
	s.next.Store(s.from)
	r := w.reader()
	defer func() {
		s.elapsed = time.Since(s.started)
		st := r.Stats()
		s.aborted, s.lost = st.Aborted, st.Lost
		if err != nil && !errors.Is(err, context.Canceled) {
			s.err = err
			w.log.Error().Err(err).Int64("offset", s.next.Load()).Msg("partition failed")
		}
	}()
	w.log.Debug().Int64("from", s.from).Int64("end", s.End).Msg("partition started")
	batch := j.Plan.Sink.BatchSize
	pf := source.Prefetch(ctx, r)
	w.pf = pf
	defer pf.Stop() // before the deferred report reads r.Stats
	defer func() {
		if cerr := w.commits.Commit(); err == nil {
			err = cerr
		}
	}()
	w.pos = s.from
	for w.pos < s.End {
		if err := ctx.Err(); err != nil {
			return err
		}
		var f source.Fetched
		var ok bool
		select {
		case f, ok = <-pf.C():
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok { // the fetch loop ended without reaching the end: only on cancellation
			if err := ctx.Err(); err != nil {
				return err
			}
			return &PartitionError{Topic: j.Resolution.Topic, Partition: s.Partition, Offset: w.pos, Err: errors.New("the fetch loop stopped before the end of the range")}
		}
		s.read.Add(int64(len(f.Recs)))
		w.hold(f)
		w.pos = f.Next
		if f.Err != nil {
			return w.failLost(ctx, f.Err)
		}
		for len(w.pending) >= batch {
			if err := w.flush(ctx, batch); err != nil {
				return err
			}
		}
		done := w.pos >= s.End
		if len(w.pending) > 0 && (done || w.commits.Since(time.Now()) > flushAfter) {
			if err := w.flush(ctx, len(w.pending)); err != nil {
				return err
			}
		} else if len(w.pending) == 0 && w.pos > w.commits.Committable() && (done || w.commits.Since(time.Now()) > flushAfter) {
			w.commits.Wrote(w.pos) // only markers or aborted data since the last commit
		}
	}
	if err := w.commits.Commit(); err != nil {
		return err
	}
	s.done.Store(true)
	w.log.Debug().Int64("written", s.written.Load()).Msg("partition done")
	return nil
}

// flush writes the first n pending records and commits past them: to the
// reader's position when they are all that is pending (so markers and
// aborted data after them are committed too), else to after the last one.
func (w *partitionWorker) flush(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err // interrupted: only the in-flight batch is finished
	}
	chunk := w.pending[:n]
	commitAt := chunk[n-1].Offset + 1
	if n == len(w.pending) {
		commitAt = w.pos
	}
	size := 0
	for i := range chunk {
		size += len(chunk[i].Key) + len(chunk[i].Value)
	}
	if err := w.throttle.Wait(ctx, n, size); err != nil {
		return err // nothing written: the records are read again on resume
	}
	out := w.window(chunk)
	out, stop, err := w.applyFilter(out)
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
		return stop.partitionError(w.job.Resolution.Topic)
	}
	w.commits.Wrote(commitAt)
	if w.commits.Due(time.Now()) {
		if err := w.commits.Commit(); err != nil {
			return err
		}
	}
	last := w.pending[n-1].Offset
	w.pending = append(w.pending[:0], w.pending[n:]...)
	w.releaseThrough(last) // written and committed (or due): no longer used
	return nil
}

// window applies the time window to records: it counts records stamped
// outside it and, with strict_timestamps or skew_margin, drops them.
func (w *partitionWorker) window(chunk []record.Record) []record.Record {
	res, win := w.job.Resolution, w.job.Plan.Window
	if res.From.IsZero() {
		return chunk
	}
	strict := win.StrictTimestamps || win.SkewMargin > 0
	out := chunk[:0:0]
	if !strict {
		out = chunk
	}
	var dropped int64 // counted once per batch: skip takes a lock
	for _, rec := range chunk {
		inside := !rec.Time.Before(res.From) && (res.To.IsZero() || rec.Time.Before(res.To))
		switch {
		case inside && strict:
			out = append(out, rec)
		case !inside && strict:
			dropped++
		case !inside:
			w.state.outside++
		}
	}
	if dropped > 0 {
		w.state.skip("outside-window", dropped)
	}
	return out
}

// write hands records to the sink with the durable-write contract,
// retrying transient failures (sinks.Transient). A record the sink cannot
// take follows on_error: skipped or dead-lettered, the others are written
// again without it; under on_error: fail, the records before it are
// written and it is returned.
func (w *partitionWorker) write(recs []record.Record) (*failure, error) {
	j := w.job
	for len(recs) > 0 {
		err := w.retry("sink", w.sink, func(ctx context.Context) error { return w.sink.Write(ctx, recs) })
		if err == nil {
			w.state.written.Add(int64(len(recs)))
			return nil, nil
		}
		var re *record.Error
		if !errors.As(err, &re) {
			return nil, &PartitionError{Topic: j.Resolution.Topic, Partition: w.state.Partition, Offset: w.state.next.Load(),
				Err: fmt.Errorf("sink %s: %w; nothing past offset %d is committed: fix the sink and re-run the same command to resume", j.Plan.Sink.Type, err, w.state.next.Load())}
		}
		i := slices.IndexFunc(recs, func(r record.Record) bool { return r.Offset == re.Offset })
		if i < 0 {
			return nil, fmt.Errorf("sink %s rejected offset %d, which is not in the batch: %w", j.Plan.Sink.Type, re.Offset, err)
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

// newCommitter builds the committer of s's partition: it commits as this
// process's member of the group (run --join) or standalone, with the plan's
// metadata and the sinks' positions.
func (j *Job) newCommitter(sink sinks.Sink, s *partitionState) *committer {
	return &committer{topic: j.Resolution.Topic, partition: s.Partition, sinkName: "sink " + j.Plan.Sink.Type,
		sink: sink.Capabilities(), dead: sinks.CapabilitiesOf(j.DeadLetters), timeout: j.opts.FlushTimeout, committed: &s.next,
		commit: func(ctx context.Context, next, pos, deadPos int64) error {
			meta := j.meta(s.Range)
			meta.Pos, meta.DPos = pos, deadPos
			return j.c.commitAs(ctx, j.member.Load(), j.Plan.Group, j.Resolution.Topic, map[int32]int64{s.Partition: next}, map[int32]checkpointMeta{s.Partition: meta})
		}}
}
