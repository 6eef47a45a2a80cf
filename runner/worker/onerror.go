package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/mapping"
	"github.com/replay-tool/replay/internal/pipeline"
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

// ErrorLimitError stops a run whose records that could not be processed
// exceed max_errors.
type ErrorLimitError struct {
	Count   int64  // records that could not be processed so far
	Allowed int64  // what max_errors allows
	Limit   string // max_errors as written
	Records int64  // the records the percentage is taken of
}

func (e *ErrorLimitError) Error() string {
	of := ""
	if e.Limit != fmt.Sprint(e.Allowed) {
		of = fmt.Sprintf(" = %d of the %d records in the run's ranges", e.Allowed, e.Records)
	}
	return fmt.Sprintf("max_errors exceeded: %d records could not be processed, more than max_errors %s%s; the batch with the last one is not committed: "+
		"look at the reasons, then fix the data or the plan, or raise max_errors, and re-run the same command to resume", e.Count, e.Limit, of)
}

// errorBudget counts the records of a run that could not be processed,
// across partitions, against max_errors.
type errorBudget struct {
	limit   plan.ErrorLimit
	allowed int64 // -1: no limit
	records int64
	n       atomic.Int64
}

func newErrorBudget(limit plan.ErrorLimit, records int64) *errorBudget {
	return &errorBudget{limit: limit, allowed: limit.Allowed(records), records: records}
}

// add counts one more record and fails once the count passes the limit.
func (b *errorBudget) add() error {
	n := b.n.Add(1)
	if b.allowed >= 0 && n > b.allowed {
		return &ErrorLimitError{Count: n, Allowed: b.allowed, Limit: b.limit.String(), Records: b.records}
	}
	return nil
}

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
// skip counts it, dead_letter queues it for the dead-letter sink (written
// before the commit passes it), fail returns it as a *failure. Skipped and
// dead-lettered records count against max_errors.
func (w *Worker) unprocessable(r *record.Record, reason string, err error) (*failure, error) {
	s := w.state
	s.unprocessable(reason)
	msg := err.Error()
	var re *record.Error
	if errors.As(err, &re) {
		msg = re.Err.Error() // the coordinates are the record's own
	}
	switch w.Plan.OnError {
	case plan.OnErrorSkip:
		w.log.Warn().Int64("offset", r.Offset).Str("reason", msg).Msg("record skipped (on_error: skip)")
		s.skip(reason, 1)
	case plan.OnErrorDeadLetter:
		w.log.Warn().Int64("offset", r.Offset).Str("reason", msg).Msg("record dead-lettered (on_error: dead_letter)")
		s.skip(skipDeadLettered, 1)
		w.dead = append(w.dead, sinks.DeadLetter(*r, msg))
	default:
		return &failure{rec: r, reason: reason, err: err}, nil
	}
	return nil, w.budget.add()
}

// partitionError reports f: the partition stopped at its record.
func (f *failure) partitionError(topic string) error {
	err := f.err
	var re *record.Error
	if !errors.As(err, &re) {
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

// keyDeadLetters renders the dead-letter sink's key for each dead letter,
// once, before the write and its retries: a key template that fails on a
// dead letter is its *record.Error.
func keyDeadLetters(k pipeline.Key, dead []record.Record) error {
	for i := range dead {
		if err := k.Apply(&dead[i]); err != nil {
			return err
		}
	}
	return nil
}

// writeDeadLetters makes the batch's dead letters durable, in offset order,
// before the commit passes them.
func (w *Worker) writeDeadLetters() error {
	if len(w.dead) == 0 {
		return nil
	}
	slices.SortFunc(w.dead, func(a, b record.Record) int { return cmp.Compare(a.Offset, b.Offset) })
	err := keyDeadLetters(w.deadKey, w.dead)
	if err == nil {
		err = w.retry("dead-letter sink", w.DeadLetters, time.Duration(w.Plan.DeadLetter.Retry.MaxElapsed), func(ctx context.Context) error {
			return w.DeadLetters.Write(ctx, w.dead)
		})
	}
	if err != nil {
		advice := "fix the dead-letter sink and re-run the same command to resume"
		next, cerr := w.commitBeforeFailure()
		if cerr != nil {
			advice = fmt.Sprintf("committing the batches before it failed too (%v); %s", cerr, advice)
		}
		return &source.PartitionError{Topic: w.Topic, Partition: w.state.Partition, Offset: w.dead[0].Offset,
			Err: fmt.Errorf("write dead letters to the %s sink: %w; nothing past offset %d is committed: %s",
				w.Plan.DeadLetter.Type, err, next, advice)}
	}
	w.commits.WroteDeadLetters()
	clear(w.dead) // do not pin the records' bytes
	w.dead = w.dead[:0]
	return nil
}
