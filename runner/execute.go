package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// Run replays the job's ranges into sink. Every partition is read by its
// own goroutine from its start (or checkpoint) to its end, throttled, and
// written in batches; after each batch the sink made durable, the next
// offset is committed to the replay group with the plan fingerprint and the
// range end as metadata. When every partition is done, sink.Finish
// publishes the output.
//
// Cancelling ctx stops the run after the in-flight batch is written and
// committed; Run then returns an error wrapping ErrInterrupted. A failing
// partition stops the others the same way and Run returns its
// *PartitionError; nothing is ever committed past what the sink holds.
func (j *Job) Run(ctx context.Context, sink sinks.Sink) (*Report, error) {
	rep := &Report{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Topic: j.Resolution.Topic, Group: j.Plan.Group,
		Sink: j.Plan.Sink.Type, Started: j.opts.Now().UTC(), Ignored: j.Ignored, From: j.Resolution.From, To: j.Resolution.To}
	work := context.WithoutCancel(ctx)
	if j.Fresh {
		if err := j.dropDiscarded(work); err != nil {
			return rep, err
		}
	}
	if err := j.commitStarts(work); err != nil {
		return rep, err
	}
	states := make([]*partitionState, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		states[i] = &partitionState{Range: r, from: j.from(r)}
	}
	rep.NothingToDo = j.NothingToDo()
	err := j.readAll(ctx, sink, states)
	for _, s := range states {
		rep.Partitions = append(rep.Partitions, s.report())
	}
	rep.Finished = j.opts.Now().UTC()
	if err != nil {
		return rep, err
	}
	fctx, cancel := context.WithTimeout(work, j.opts.FlushTimeout)
	defer cancel()
	if err := sink.Finish(fctx); err != nil {
		return rep, fmt.Errorf("publish sink output: %w", err)
	}
	return rep, nil
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
		meta[r.Partition] = j.meta(r)
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
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range states {
		if s.from >= s.End {
			s.next.Store(s.from)
			s.done = true
			continue
		}
		pl := log.With().Str("plan", j.Plan.Name).Str("topic", j.Resolution.Topic).Int32("partition", s.Partition).Logger()
		w := &partitionWorker{job: j, sink: sink, throttle: throttle, state: s, log: pl}
		g.Go(func() error { return w.run(gctx) })
	}
	stopProgress := j.progress(states)
	err := g.Wait()
	stopProgress()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: the in-flight batches were written and committed; re-run the same command to resume", ErrInterrupted)
	}
	return err
}

// progress logs totals every ProgressEvery until the returned func is called.
func (j *Job) progress(states []*partitionState) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(j.opts.ProgressEvery)
		defer t.Stop()
		start, total := time.Now(), j.Resolution.Total()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var written, pos int64
				for _, s := range states {
					written += s.written.Load()
					pos += s.next.Load() - s.Start
				}
				el := time.Since(start).Seconds()
				j.opts.Log.Info().Int64("written", written).Int64("offsets_done", pos).Int64("offsets_total", total).
					Float64("records_per_second", float64(written)/el).Msg("progress")
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// partitionState is one partition's live counters; the worker owns it.
type partitionState struct {
	Range
	from          int64
	next, written atomic.Int64
	read          int64
	skipped       map[string]int64
	aborted       int64
	outside       int64
	started       time.Time
	elapsed       time.Duration
	done          bool
	err           error
}

func (s *partitionState) skip(reason string, n int64) {
	if s.skipped == nil {
		s.skipped = map[string]int64{}
	}
	s.skipped[reason] += n
}

func (s *partitionState) report() PartitionReport {
	r := PartitionReport{Partition: s.Partition, Outcome: s.Outcome, Start: s.Start, End: s.End, From: s.from,
		Next: max(s.next.Load(), s.from), Read: s.read, Written: s.written.Load(), Skipped: s.skipped, Aborted: s.aborted,
		OutsideWindow: s.outside, Lost: s.Lost, DurationMS: s.elapsed.Milliseconds(), Done: s.done}
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
	pending []sinks.Record
	last    time.Time // last commit
}

// flushAfter writes a partial batch of a slow partition after this long.
const flushAfter = time.Second

func (w *partitionWorker) run(ctx context.Context) (err error) {
	s, j := w.state, w.job
	s.started, w.last = time.Now(), time.Now()
	s.next.Store(s.from)
	r := newPartitionReader(j.c, j.Resolution.Topic, s.Partition, j.Plan.Source.Isolation, s.from, s.End)
	defer func() {
		s.elapsed = time.Since(s.started)
		s.aborted = r.stats.aborted
		if err != nil && !errors.Is(err, context.Canceled) {
			s.err = err
			w.log.Error().Err(err).Int64("offset", s.next.Load()).Msg("partition failed")
		}
	}()
	w.log.Debug().Int64("from", s.from).Int64("end", s.End).Msg("partition started")
	batch := j.Plan.Sink.BatchSize
	for !r.done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		before := len(w.pending)
		if w.pending, err = r.fetch(ctx, w.pending); err != nil {
			return err
		}
		s.read += int64(len(w.pending) - before)
		for len(w.pending) >= batch {
			if err := w.flush(ctx, batch, r); err != nil {
				return err
			}
		}
		if len(w.pending) > 0 && (r.done() || time.Since(w.last) > flushAfter) {
			if err := w.flush(ctx, len(w.pending), r); err != nil {
				return err
			}
		} else if len(w.pending) == 0 && r.next > s.next.Load() && (r.done() || time.Since(w.last) > flushAfter) {
			if err := w.commit(r.next); err != nil { // only markers or aborted data since the last commit
				return err
			}
		}
	}
	s.done = true
	w.log.Debug().Int64("written", s.written.Load()).Msg("partition done")
	return nil
}

// flush writes the first n pending records and commits past them: to the
// reader's position when they are all that is pending (so markers and
// aborted data after them are committed too), else to after the last one.
func (w *partitionWorker) flush(ctx context.Context, n int, r *partitionReader) error {
	if err := ctx.Err(); err != nil {
		return err // interrupted: only the in-flight batch is finished
	}
	chunk := w.pending[:n]
	commitAt := chunk[n-1].Offset + 1
	if n == len(w.pending) {
		commitAt = r.next
	}
	size := 0
	for i := range chunk {
		size += len(chunk[i].Key) + len(chunk[i].Value)
	}
	if err := w.throttle.Wait(ctx, n, size); err != nil {
		return err // nothing written: the records are read again on resume
	}
	out := w.window(chunk)
	if err := w.write(out); err != nil {
		return err
	}
	if err := w.commit(commitAt); err != nil {
		return err
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	return nil
}

// window applies the time window to records: it counts records stamped
// outside it and, with strict_timestamps or skew_margin, drops them.
func (w *partitionWorker) window(chunk []sinks.Record) []sinks.Record {
	res, win := w.job.Resolution, w.job.Plan.Window
	if res.From.IsZero() {
		return chunk
	}
	strict := win.StrictTimestamps || win.SkewMargin > 0
	out := chunk[:0:0]
	if !strict {
		out = chunk
	}
	for _, rec := range chunk {
		inside := !rec.Time.Before(res.From) && (res.To.IsZero() || rec.Time.Before(res.To))
		switch {
		case inside && strict:
			out = append(out, rec)
		case !inside && strict:
			w.state.skip("outside-window", 1)
		case !inside:
			w.state.outside++
		}
	}
	return out
}

// write hands records to the sink with the durable-write contract; a
// record the sink cannot take follows on_error.
func (w *partitionWorker) write(recs []sinks.Record) error {
	j := w.job
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.FlushTimeout)
	defer cancel()
	for len(recs) > 0 {
		err := w.sink.Write(ctx, recs)
		if err == nil {
			w.state.written.Add(int64(len(recs)))
			return nil
		}
		var re *sinks.RecordError
		if !errors.As(err, &re) || j.Plan.OnError != plan.OnErrorSkip {
			return &PartitionError{Topic: j.Resolution.Topic, Partition: w.state.Partition, Offset: recs[0].Offset, Err: fmt.Errorf("sink %s: %w", j.Plan.Sink.Type, err)}
		}
		w.log.Warn().Err(err).Int64("offset", re.Offset).Msg("record skipped (on_error: skip)")
		w.state.skip("sink-rejected", 1)
		kept := recs[:0:0]
		for _, r := range recs {
			if r.Offset != re.Offset {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(recs) {
			return fmt.Errorf("sink %s rejected offset %d, which is not in the batch: %w", j.Plan.Sink.Type, re.Offset, err)
		}
		recs = kept
	}
	return nil
}

// commit stores next as the partition's checkpoint; it runs only after
// the sink made everything below next durable.
func (w *partitionWorker) commit(next int64) error {
	j, s := w.job, w.state
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.FlushTimeout)
	defer cancel()
	err := j.c.commit(ctx, j.Plan.Group, j.Resolution.Topic, map[int32]int64{s.Partition: next}, map[int32]checkpointMeta{s.Partition: j.meta(s.Range)})
	if err != nil {
		return &PartitionError{Topic: j.Resolution.Topic, Partition: s.Partition, Offset: s.next.Load(), Err: err}
	}
	s.next.Store(next)
	w.last = time.Now()
	return nil
}
