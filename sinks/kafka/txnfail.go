package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceError is a failed produce of a transaction's records: how many
// failed, and the first of them (its index in the batch).
type produceError struct {
	err           error
	failed, first int
}

// produceFailure returns the failure of a ProduceSync, or nil.
func produceFailure(rs kgo.ProduceResults) *produceError {
	var pe *produceError
	for i, r := range rs {
		if r.Err == nil {
			continue
		}
		if pe == nil {
			pe = &produceError{err: r.Err, first: i}
		}
		pe.failed++
	}
	return pe
}

func (e *produceError) Error() string { return e.err.Error() }

func (e *produceError) Unwrap() error { return e.err }

// failed aborts the open transaction after err, retires the producer, and
// says what Write returns: a *FencedError when another producer took the
// id over; nil when an EndTxn whose answer was lost did commit; else err,
// transient unless it is permanent.
func (t *txnCommitter) failed(ctx context.Context, cl *kgo.Client, p int32, next int64, err error, began time.Time, ending bool) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if aerr := cl.AbortBufferedRecords(actx); aerr == nil {
		// After a bumped epoch (KIP-360) kgo re-initialises the producer id:
		// PRODUCER_FENCED when another producer took the id over.
		_ = cl.EndTransaction(actx, kgo.TryAbort)
	}
	id := t.id(p)
	if pe, ok := err.(*produceError); ok && fenced(err) {
		err = pe.err
	}
	_, _, perr := cl.ProducerID(actx)
	if lerr := t.lost(p, cl, err, perr); lerr != nil {
		return lerr
	}
	switch {
	case (fenced(err) || fenced(perr)) && time.Since(began) >= t.timeout:
		return t.timedOut(actx, cl, p, err)
	case fenced(err):
		t.drop(p, cl)
		return &FencedError{TransactionalID: id, Err: err}
	case fenced(perr):
		t.drop(p, cl)
		return &FencedError{TransactionalID: id, Err: perr}
	}
	if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		return fmt.Errorf("kafka sink: transaction of %s: %w", id, err)
	}
	// The client is not used again: its transaction may still be open
	// broker-side, and a retry's produce would join it (KIP-890 part 2).
	// The next write starts a new producer and reads the group's stable
	// offset before it skips anything (settled).
	t.drop(p, cl)
	if pe, ok := err.(*produceError); ok {
		t.markUnsure(p)
		return pe // Sink.writeTxn tells a refused record from a transient failure
	}
	if ending {
		// A context of its own: the abort above may have used actx up.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		off, ok, serr := t.stable(sctx, p)
		scancel()
		if serr == nil && ok && off >= next {
			return nil // the commit went through; its answer was lost
		}
	}
	t.markUnsure(p)
	if ctx.Err() != nil {
		return fmt.Errorf("kafka sink: produce to %s: %w", t.where, ctx.Err())
	}
	return transientTxn(fmt.Errorf("kafka sink: transaction of %s to %s (aborted; the batch is written again): %w", id, t.where, err))
}

// timedOut handles a transaction that outlived transaction.timeout.ms,
// which the broker aborted with a bumped epoch, like a fencing: the client
// is replaced and what the group holds is read again.
func (t *txnCommitter) timedOut(ctx context.Context, cl *kgo.Client, p int32, err error) error {
	t.drop(p, cl)
	if cps, cerr := t.checkpoints(ctx); cerr == nil {
		t.mu.Lock()
		t.committed[p] = max(t.committed[p], cps[p])
		t.mu.Unlock()
	} else {
		t.markUnsure(p) // the retry reads the group again before it skips
	}
	return &sinks.TransientError{Err: fmt.Errorf("kafka sink: the transaction of %s outlived its timeout (%v) and the broker aborted it; the batch is written again in a new one: %w", t.id(p), t.timeout, err)}
}

// lostError is a Write or CommitOffset of a partition that another member
// of the group owns now (run --join); it wraps sinks.ErrPartitionLost.
type lostError struct {
	id  string
	err error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("kafka sink: transaction of %s: %v (%v)", e.id, sinks.ErrPartitionLost, e.err)
}

func (e *lostError) Unwrap() []error { return []error{sinks.ErrPartitionLost, e.err} }

// lost returns, under run --join, a *lostError when err or perr says that
// the member lost p; nil otherwise.
func (t *txnCommitter) lost(p int32, cl *kgo.Client, err, perr error) error {
	if t.member == nil {
		return nil
	}
	for _, e := range []error{err, perr} {
		if e != nil && (fenced(e) || errors.Is(e, kerr.IllegalGeneration) || errors.Is(e, kerr.UnknownMemberID) ||
			errors.Is(e, kerr.FencedInstanceID) || errors.Is(e, kerr.RebalanceInProgress)) {
			t.drop(p, cl)
			return &lostError{id: t.id(p), err: e}
		}
	}
	return nil
}

// fenced reports whether err says another producer took the transactional
// id over: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH that kgo could not
// recover from.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// drop closes partition p's client so the next write starts a new one.
func (t *txnCommitter) drop(p int32, cl *kgo.Client) {
	t.mu.Lock()
	if t.producers[p] == cl {
		delete(t.producers, p)
	}
	t.mu.Unlock()
	cl.Close()
}
