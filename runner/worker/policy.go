package worker

import (
	"context"
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
	if b.Min == 0 {
		b.Min = 200 * time.Millisecond
	}
	if b.Max == 0 {
		b.Max = 5 * time.Second
	}
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
