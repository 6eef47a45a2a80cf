package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/replay-tool/replay/internal/backoff"
	"github.com/replay-tool/replay/sinks"
)

// Inside Write, a failed transaction is aborted and Write fails transient
// for the runner to retry; kgo retries within one transaction what it can,
// and the sink's own requests are retried in place (retryRequest). Outside
// Write the sink retries its calls itself (again).

// retriable reports whether err, from a request to the target cluster,
// may pass by itself: an error Kafka calls retriable,
// CONCURRENT_TRANSACTIONS, or the connection dropped or timed out.
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || ke == kerr.ConcurrentTransactions
	}
	return errors.Is(err, io.EOF) || sinks.Transient(err)
}

// requestTries is how often retryRequest sends one request.
const requestTries = 20

// retryRequest sends an idempotent coordinator request (fn) again while it
// fails retriably, up to requestTries times, 5 ms doubling to 500 ms
// apart, each retry counted and logged (but a stable read's wait,
// UNSTABLE_OFFSET_COMMIT).
func (t *txnCommitter) retryRequest(ctx context.Context, what string, fn func() error) error {
	wait := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !retriable(err) || attempt >= requestTries || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			t.log.Debug().Err(err).Int("attempt", attempt).Msgf("kafka sink: %s: waiting for a transaction to complete", what)
		} else {
			t.retries.Add(1)
			t.log.Warn().Err(err).Int("attempt", attempt).Int64("retry_in_ms", wait.Milliseconds()).Msgf("kafka sink: %s: retriable error, retrying", what)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// again runs fn, a call of the sink outside Write, until it succeeds,
// fails with an error that is not transient, or has kept failing for the
// sink's retry budget (sink.retry.max_elapsed): then it returns a
// *RetryError. The waits double from 200 ms to 5 s, jittered; each retry
// is counted and logged.
func (t *txnCommitter) again(ctx context.Context, what string, fn func(context.Context) error) error {
	r := backoff.Policy{Min: 200 * time.Millisecond, Max: 5 * time.Second, Budget: t.budget}.Start()
	for {
		err := fn(ctx)
		if err == nil || !sinks.Transient(err) || ctx.Err() != nil {
			return err
		}
		d, left, ok := r.Failed()
		if !ok {
			return &RetryError{What: what, Where: t.where, Attempts: r.Attempts(), Elapsed: r.Elapsed(), Budget: t.budget, Err: err}
		}
		t.retries.Add(1)
		t.log.Warn().Err(err).Int("attempt", r.Attempts()).Int64("retry_in_ms", d.Milliseconds()).Int64("budget_left_ms", left.Milliseconds()).Msgf("kafka sink: %s: transient error, retrying", what)
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// RetryError is a call of the exactly-once sink outside Write (starting
// its transactional producers, reading or resetting the group's offsets on
// the target cluster) that kept failing with transient errors until the
// sink's retry budget was spent. Such a call comes before the run writes
// anything: the replay group's offsets are where the last run left them.
type RetryError struct {
	// What names the call; Where the target topic and cluster.
	What, Where string
	Attempts    int
	Elapsed     time.Duration
	Budget      time.Duration
	Err         error
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("kafka sink: exactly_once: %s on %s failed %d times in %s, which spends the retry budget of %s (sink.retry.max_elapsed); last error: %v; this run produced and committed nothing, so the replay group's offsets stand where the last run left them: once the target cluster is healthy, re-run the same command to resume from them (or raise sink.retry.max_elapsed to ride out longer outages)",
		e.What, e.Where, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Budget, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// Retries is how many times the sink retried a request or a call by
// itself since New, each logged; neither the runner's retries of a failed
// Write nor franz-go's own retries are included.
func (s *Sink) Retries() int64 { return s.retries.Load() }
