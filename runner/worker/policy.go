// Package worker replays a run's partitions, one Worker each: it reads a
// partition's range, runs the window and the record pipeline, hands the
// records to the sink under the throttle and the error policy (on_error,
// max_errors), and commits what the sinks made durable. RunAll runs the
// workers of one run under a Policy they share.
package worker

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

// Policy is what the partition workers of one run share: the plan, the
// sinks, the source cluster the readers fetch from, and how a partition's
// commit reaches the replay group.
type Policy struct {
	Plan *plan.Plan
	// From and To are the time window's bounds (From zero: no time window;
	// To zero: none at the end).
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

// Backoff says how a sink write that failed with a transient error
// (sinks.Transient) is retried: a capped exponential backoff with jitter,
// until the plan's sink.retry.max_elapsed (plan.SinkRetry) has passed since
// the batch first failed.
type Backoff struct {
	// Min is the first wait, doubled after each try up to Max; defaults
	// 200 ms and 5 s. Each wait is jittered down by up to half.
	Min, Max time.Duration
}

func (b *Backoff) defaults() {
	b.Min = cmp.Or(b.Min, 200*time.Millisecond)
	b.Max = cmp.Or(b.Max, 5*time.Second)
}

// SignalTime is how soon after the first signal (SIGINT, SIGTERM) a run
// ends, even with a sink that hangs: the time the documentation gives.
const SignalTime = 10 * time.Second

// signalGrace is how long a write in flight when the run is cancelled (a
// signal) may still take before it is cancelled too: the first signal
// finishes the in-flight batch, but a hanging sink must not hold it for
// minutes. What is left of SignalTime is for the sink to give up the
// cancelled write, the commit, and closing the sink (bounded by the
// command, see SignalTime).
const signalGrace = 7 * time.Second

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

// add counts one more record and fails once the count passes the limit.
func (b *errorBudget) add() error {
	n := b.n.Add(1)
	if b.allowed >= 0 && n > b.allowed {
		return &ErrorLimitError{Count: n, Allowed: b.allowed, Limit: b.limit.String(), Records: b.records}
	}
	return nil
}
