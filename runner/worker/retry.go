package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replay-tool/replay/internal/backoff"
	"github.com/replay-tool/replay/sinks"
)

// SinkRetryError is a sink write that kept failing with transient errors
// until the sink's retry budget (sink.retry.max_elapsed) was spent. Err is
// the last error.
type SinkRetryError struct {
	// What names the target: "sink", "dead-letter sink".
	What     string
	Attempts int
	Elapsed  time.Duration
	Budget   time.Duration
	Err      error
}

func (e *SinkRetryError) Error() string {
	field := "sink.retry.max_elapsed"
	if e.What != "sink" {
		field = "dead_letter.retry.max_elapsed"
	}
	return fmt.Sprintf("write failed %d times in %s, which spends the retry budget of %s (%s); last error: %v",
		e.Attempts, e.Elapsed.Round(time.Millisecond), e.Budget, field, e.Err)
}

func (e *SinkRetryError) Unwrap() error { return e.Err }

// retry runs write to target, each try under its own FlushTimeout, until it
// succeeds, fails with an error that is not transient, or has kept failing
// for budget since its first failure: then the last error comes back in a
// *SinkRetryError. The waits double from Backoff.Min to Backoff.Max,
// jittered. Each try made again is logged and counted.
//
// A sink that retries by its own policy (sinks.Capabilities.RetriesItself, the
// http sink's max_retries) gets one try, under a deadline of the budget
// plus FlushTimeout, which its own retries respect: retrying it again
// would multiply its attempts.
//
// The run's cancellation (a signal) lets the try in flight finish, for up
// to signalGrace, but starts no other: the batch is then not committed,
// and a resume delivers it again; the partition is marked abandoned for
// the final message.
func (w *Worker) retry(what string, target sinks.Sink, budget time.Duration, write func(context.Context) error) error {
	b := w.Retry
	b.defaults()
	self := target.Capabilities().RetriesItself
	run := cmp.Or(w.runCtx, context.Background())
	r := backoff.Policy{Min: b.Min, Max: b.Max, Budget: budget}.Start()
	abandon := func(err error, how string) error {
		w.state.Abandoned.Store(true)
		w.log.Warn().Err(err).Msgf("%s: failing when the run was stopped: not retried; the batch is not committed and is delivered again on resume", what)
		return fmt.Errorf("%w: the %s %s (the batch is not committed and is delivered again on resume): %w", context.Canceled, what, how, err)
	}
	for {
		limit := w.FlushTimeout
		if self {
			limit += budget
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		stop := context.AfterFunc(run, func() { time.AfterFunc(signalGrace, cancel) })
		err := write(ctx)
		stop()
		cancel()
		switch {
		case err == nil:
			return nil
		case run.Err() != nil && (sinks.Transient(err) || errors.Is(err, context.Canceled)):
			// Failing when the run was stopped, or cut off by signalGrace.
			return abandon(err, "still failed when the run was stopped, so it was not retried")
		case !sinks.Transient(err):
			return err
		case self:
			return err // retried by its own policy already
		}
		d, left, ok := r.Failed()
		if !ok {
			return &SinkRetryError{What: what, Attempts: r.Attempts(), Elapsed: r.Elapsed(), Budget: budget, Err: err}
		}
		w.state.retried(what)
		w.log.Warn().Err(err).Int("attempt", r.Attempts()).Int64("retry_in_ms", d.Milliseconds()).Int64("budget_left_ms", left.Milliseconds()).Msgf("%s: transient error, retrying", what)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-run.Done():
			t.Stop()
			return abandon(err, "failed and the run was stopped before it was retried")
		}
	}
}
