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

// retry runs write, each try under its own FlushTimeout, until it succeeds,
// fails with an error that is not transient, or Attempts tries failed. It
// does not stop on the run's cancellation: the in-flight batch is finished.
func (w *partitionWorker) retry(what string, write func(context.Context) error) error {
	b := w.job.opts.Retry
	wait := b.Min
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), w.job.opts.FlushTimeout)
		err := write(ctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case !sinks.Transient(err):
			return err
		case attempt >= b.Attempts:
			return fmt.Errorf("%w (transient, gave up after %d attempts)", err, attempt)
		}
		d := wait/2 + rand.N(wait/2+1)
		w.log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", d).Msgf("%s: transient error, retrying", what)
		time.Sleep(d)
		wait = min(2*wait, b.Max)
	}
}
