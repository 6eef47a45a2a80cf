package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/replay-tool/replay/sinks"
)

// Backoff says how a sink write that failed with a transient error
// (sinks.Transient) is retried.
type Backoff struct {
	// Attempts is the number of tries in all; default 5.
	Attempts int
	// Min is the first wait, doubled after each try up to Max; defaults
	// 200 ms and 5 s. Each wait is jittered down by up to half.
	Min, Max time.Duration
}

func (b *Backoff) defaults() {
	if b.Attempts == 0 {
		b.Attempts = 5
	}
	if b.Min == 0 {
		b.Min = 200 * time.Millisecond
	}
	if b.Max == 0 {
		b.Max = 5 * time.Second
	}
}

// signalGrace is how long a write in flight when the run is cancelled (a
// signal) may still take before it is cancelled too: the first signal
// finishes the in-flight batch, but a hanging sink must not hold it for
// minutes.
const signalGrace = 10 * time.Second

// retry runs write to target, each try under its own FlushTimeout, until it
// succeeds, fails with an error that is not transient, or Attempts tries
// failed. A sink that retries by its own policy (sinks.Capabilities.RetriesItself, the
// http sink's max_retries) gets one try, without FlushTimeout: retrying it
// again would multiply its attempts.
//
// The run's cancellation (a signal) lets the try in flight finish, for up
// to signalGrace, but starts no other: the batch is then not committed,
// and a resume delivers it again.
func (w *partitionWorker) retry(what string, target sinks.Sink, write func(context.Context) error) error {
	b := w.job.opts.Retry
	attempts := b.Attempts
	self := target.Capabilities().RetriesItself
	if self {
		attempts = 1
	}
	run := w.runCtx
	if run == nil {
		run = context.Background()
	}
	wait := b.Min
	for attempt := 1; ; attempt++ {
		var ctx context.Context
		var cancel context.CancelFunc
		if self {
			ctx, cancel = context.WithCancel(context.Background())
		} else {
			ctx, cancel = context.WithTimeout(context.Background(), w.job.opts.FlushTimeout)
		}
		stop := context.AfterFunc(run, func() { time.AfterFunc(signalGrace, cancel) })
		err := write(ctx)
		stop()
		cancel()
		switch {
		case err == nil:
			return nil
		case !sinks.Transient(err):
			return err
		case run.Err() != nil:
			w.log.Warn().Err(err).Msgf("%s: failing when the run was stopped: not retried; the batch is not committed and is delivered again on resume", what)
			return fmt.Errorf("%w: the %s still failed when the run was stopped, so it was not retried (the batch is not committed and is delivered again on resume): %w", context.Canceled, what, err)
		case attempt >= attempts:
			if self {
				return err
			}
			return fmt.Errorf("%w (transient, gave up after %d attempts)", err, attempt)
		}
		d := wait/2 + rand.N(wait/2+1)
		w.log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", d).Msgf("%s: transient error, retrying", what)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-run.Done():
			t.Stop()
			w.log.Warn().Err(err).Msgf("%s: failing when the run was stopped: not retried; the batch is not committed and is delivered again on resume", what)
			return fmt.Errorf("%w: the %s failed and the run was stopped before it was retried (the batch is not committed and is delivered again on resume): %w", context.Canceled, what, err)
		}
		wait = min(2*wait, b.Max)
	}
}
