package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/mapping"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
)

// Reasons a record could not be processed, as counted in
// PartitionReport.Errors (and in Skipped under on_error: skip).
const (
	reasonDecode  = "decode-error"  // its key or value did not decode (decode:)
	reasonFilter  = "filter-error"  // the filter expression failed on it
	reasonKey     = "key-error"     // the key template failed or rendered nothing
	reasonMapping = "mapping-error" // a step of the mapping failed on it
	reasonSink    = "sink-rejected" // the sink refused the row
)

// Skipped reasons besides the error reasons.
const (
	skipFiltered     = "filtered"      // the filter was false
	skipDeadLettered = "dead-lettered" // written to the dead_letter sink
)

// failure is a record that cannot be processed under on_error: fail: the
// partition writes and commits what precedes it, then stops at it.
type failure struct {
	rec    *record.Record
	reason string
	err    error
}

// reasonOf classifies a *record.Error returned by the pipeline or a sink.
func reasonOf(err error) string {
	var fe *filter.EvalError
	var de *decode.BadRecordError
	switch {
	case errors.As(err, &de):
		return reasonDecode
	case errors.As(err, &fe):
		return reasonFilter
	case mapping.IsMappingError(err):
		return reasonMapping
	case errors.Is(err, sinks.ErrKeyTemplate) || errors.Is(err, sinks.ErrEmptyKey):
		return reasonKey
	}
	return reasonSink
}

// unprocessable handles a record that cannot be processed, per on_error:
// skip counts it, dead_letter queues it for the dead-letter sink (written,
// and counted, before the commit passes it), fail returns it as a *failure. Skipped and
// dead-lettered records count against max_errors.
func (w *Worker) unprocessable(r *record.Record, reason string, err error) (*failure, error) {
	s := w.state
	s.unprocessable(reason)
	msg := err.Error()
	if re, ok := errors.AsType[*record.Error](err); ok {
		msg = re.Err.Error() // the coordinates are the record's own
	}
	switch w.Plan.OnError {
	case plan.OnErrorSkip:
		w.log.Warn().Int64("offset", r.Offset).Str("reason", msg).Msg("record skipped (on_error: skip)")
		s.skip(reason, 1)
	case plan.OnErrorDeadLetter:
		w.log.Warn().Int64("offset", r.Offset).Str("reason", msg).Msg("record dead-lettered (on_error: dead_letter)")
		w.dead = append(w.dead, sinks.DeadLetter(*r, msg))
	default:
		return &failure{rec: r, reason: reason, err: err}, nil
	}
	return nil, w.budget.add()
}

// partitionError reports f: the partition stopped at its record.
func (f *failure) partitionError(topic string) error {
	err := f.err
	if _, ok := errors.AsType[*record.Error](err); !ok {
		err = &record.Error{Topic: topic, Partition: f.rec.Partition, Offset: f.rec.Offset, Err: err}
	}
	return &source.PartitionError{Topic: topic, Partition: f.rec.Partition, Offset: f.rec.Offset,
		Err: fault.With(fmt.Errorf("%w (%s; on_error: fail stopped the partition at this record, everything before it is written and committed): "+
			"fix the cause and re-run the same command to resume here; or, to pass over such records, set on_error: skip or dead_letter (a changed plan: restart the window, as follows)", err, f.reason), fault.HintRestart)}
}

// applyPipeline runs the record pipeline over recs: it drops the records
// the filter leaves out (counted as filtered) and hands those a stage fails
// on to on_error. Under on_error: fail it returns the records before the
// failing one and the failure.
func (w *Worker) applyPipeline(recs []record.Record) ([]record.Record, *failure, error) {
	if w.pipe.Identity() {
		return recs, nil, nil
	}
	out := recs[:0]    // in place: the chunk is consumed by this flush
	var filtered int64 // counted once per batch: skip takes a lock
	defer func() {
		if filtered > 0 {
			w.state.skip(skipFiltered, filtered)
		}
	}()
	for i := range recs {
		ok, err := w.pipe.Process(&recs[i])
		if re := (*record.Error)(nil); err != nil && !errors.As(err, &re) {
			return out, nil, err // not the record's: the run fails (the schema registry)
		}
		if err != nil {
			f, err := w.unprocessable(&recs[i], reasonOf(err), err)
			if f != nil || err != nil {
				return out, f, err
			}
			continue
		}
		if !ok {
			filtered++
			continue
		}
		out = append(out, recs[i])
	}
	return out, nil, nil
}

// writeDeadLetters makes the batch's dead letters durable, in offset order,
// before the commit passes them. Their keys are rendered once, before the
// write and its retries: a key template that fails is its *record.Error.
func (w *Worker) writeDeadLetters() error {
	if len(w.dead) == 0 {
		return nil
	}
	slices.SortFunc(w.dead, func(a, b record.Record) int { return cmp.Compare(a.Offset, b.Offset) })
	var err error
	for i := range w.dead {
		if err = w.deadKey.Apply(&w.dead[i]); err != nil {
			break
		}
	}
	if err == nil {
		err = w.retry("dead-letter sink", w.DeadLetters, time.Duration(w.Plan.DeadLetter.Retry.MaxElapsed), func(ctx context.Context) error {
			return w.DeadLetters.Write(ctx, w.dead)
		})
	}
	if err != nil {
		next, advice := w.commitBeforeFailure("fix the dead-letter sink and re-run the same command to resume", false)
		return &source.PartitionError{Topic: w.state.Topic, Partition: w.state.Partition, Offset: w.dead[0].Offset,
			Err: fmt.Errorf("write dead letters to the %s sink: %w; nothing past offset %d is committed: %s",
				w.Plan.DeadLetter.Type, err, next, advice)}
	}
	w.state.skip(skipDeadLettered, int64(len(w.dead))) // counted once durable
	w.commits.WroteDeadLetters()
	clear(w.dead) // do not pin the records' bytes
	w.dead = w.dead[:0]
	return nil
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
			w.commits.WroteRecords(int64(len(recs)))
			return nil, nil
		}
		var re *record.Error
		if !errors.As(err, &re) {
			advice := "fix the sink and re-run the same command to resume"
			if errors.Is(err, sinks.ErrFenced) {
				// Re-running now would fence the process that runs.
				advice = "the process that fenced this one carries on: let it finish (replay status shows its progress), and re-run only if it fails"
			}
			next, advice := w.commitBeforeFailure(advice, errors.Is(err, sinks.ErrFenced))
			perr := &source.PartitionError{Topic: w.state.Topic, Partition: w.state.Partition, Offset: next,
				Err: fmt.Errorf("sink %s: %w; nothing past offset %d is committed: %s", w.Plan.Sink.Type, err, next, advice)}
			if _, ok := errors.AsType[*SinkRetryError](err); ok {
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

// commitBeforeFailure commits what the partition wrote before a sink
// failure, as the partition does when it stops, after the commit in flight
// is answered: the failure's message then names the offset the group
// holds. It returns the committed offset and advice, which names the
// commit's error too unless fenced. Run does not commit again.
func (w *Worker) commitBeforeFailure(advice string, fenced bool) (int64, string) {
	w.committedAtFailure = true
	if err := w.commits.Commit(); err != nil && !fenced {
		advice = fmt.Sprintf("committing the batches before it failed too (%v); %s", err, advice)
	}
	return w.state.Next.Load(), advice
}

// stopsOnePartition reports whether err ends one partition and lets the
// others run to their end: a data loss, or an open transaction that did not
// end in time.
func stopsOnePartition(err error) bool {
	if h, ok := err.(*fault.Hinted); ok && h.Hint == fault.HintOpenTransaction {
		err = h.Err
	}
	return partitionFailed[*source.OpenTransactionError](err) || partitionFailed[*source.DataLossError](err)
}

// partitionFailed reports whether err is exactly a partition's error
// caused by a T (and not also a sink or commit failure).
func partitionFailed[T error](err error) bool {
	pe, ok := err.(*source.PartitionError)
	if ok {
		_, ok = pe.Err.(T)
	}
	return ok
}
