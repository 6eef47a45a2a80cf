package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/kafkaconn"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// DefaultTransactionalID is the prefix of the exactly-once sink's
// transactional ids when the plan sets none: replay-<plan>-<8 hex digits of
// the SHA-256 of the group>. It is stable across restarts and plan edits
// (the group is the replay's identity), so a restarted run fences any
// earlier process of the same replay still producing.
func DefaultTransactionalID(planName, group string) string {
	sum := sha256.Sum256([]byte(group))
	return "replay-" + planName + "-" + hex.EncodeToString(sum[:4])
}

// FencedError is returned by Write of an exactly-once sink when another
// producer with the same transactional id took over (PRODUCER_FENCED,
// KIP-98): another process of the same replay runs, or ran after this one
// stalled. This process's open transaction is aborted; nothing it
// produced in it becomes visible to read_committed consumers.
type FencedError struct {
	// TransactionalID is the fenced producer's transactional id.
	TransactionalID string
	Err             error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("kafka sink: transactional id %s was fenced by another producer with the same id: another process of this replay is running (or ran after this one stalled); this one stopped, and its open transaction is aborted (%v)", e.TransactionalID, e.Err)
}

// Unwrap returns the broker's error and sinks.ErrFenced.
func (e *FencedError) Unwrap() []error { return []error{sinks.ErrFenced, e.Err} }

// kgoOpts builds the connection options of a kgo client from the sink's
// settings (kafkaconn.Settings.KgoOpts, as the source side's client).
func kgoOpts(cfg Config, brokers []string) ([]kgo.Opt, error) {
	st := kafkaconn.Settings{Section: "sink", Brokers: brokers, TLS: cfg.TLS, SASL: cfg.SASL, ClientID: cfg.ClientID}
	opts, err := st.KgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	// The cluster answered with these settings already (New): a closed
	// connection is a drop, not missing SASL.
	return append(opts, kgo.AlwaysRetryEOF()), nil
}

// writeTxn is Write of an exactly-once sink: the batch's messages and the
// group's offset after the batch in one transaction of the partition's
// transactional producer. Nothing of a failed Write is visible to
// read_committed consumers.
func (s *Sink) writeTxn(ctx context.Context, batch []record.Record) error {
	p := batch[0].Partition
	done, err := s.txn.settled(ctx, p)
	if err != nil {
		return err
	}
	batch = batch[sort.Search(len(batch), func(i int) bool { return batch[i].Offset >= done }):]
	if len(batch) == 0 {
		return nil
	}
	recs, err := s.records(batch)
	if err != nil {
		return err
	}
	next := batch[len(batch)-1].Offset + 1
	err = s.txn.write(ctx, p, next, recs)
	var pe *produceError
	if !errors.As(err, &pe) {
		return err
	}
	// The transaction is aborted; the failure is the record's when the
	// broker refused that one alone.
	err = fmt.Errorf("kafka sink: produce to %s: %d of %d messages failed (the transaction is aborted): %w", s.where, pe.failed, len(batch), s.writeACL(pe.err))
	if pe.poison() {
		return record.NewError(&batch[pe.first], err)
	}
	return transientTxn(err)
}

// transientTxn marks a failed transaction as transient unless the broker's
// answer says trying again cannot help.
func transientTxn(err error) error {
	var ke *kerr.Error
	var fe *FencedError
	switch {
	case errors.As(err, &fe):
		return err
	case errors.As(err, &ke) && (ke == kerr.TopicAuthorizationFailed || ke == kerr.GroupAuthorizationFailed ||
		ke == kerr.TransactionalIDAuthorizationFailed || ke == kerr.UnknownTopicOrPartition || ke == kerr.InvalidTimestamp):
		return err
	}
	return &sinks.TransientError{Err: err}
}

// CommitOffset commits next as the group's offset of source partition p in
// a transaction of p's producer holding no records (an advance past
// records that produced nothing: filtered out, markers), unless the sink's
// transactions committed next or more already. A fenced producer returns
// *FencedError; other failures are transient.
func (s *Sink) CommitOffset(ctx context.Context, p int32, next int64) error {
	if s.txn == nil {
		return errors.New("kafka sink: CommitOffset needs exactly_once")
	}
	return s.txn.commitOnly(ctx, p, next)
}

// Checkpoints returns, for an exactly-once sink, the offsets the group
// holds on the target cluster for topic that this run committed in its
// transactions (OffsetFetch with RequireStable: a transaction still being
// completed is waited for). Other sinks, groups and topics have none.
func (s *Sink) Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if s.txn == nil || group != s.txn.group || topic != s.txn.topic {
		return nil, nil
	}
	var cps map[int32]int64
	err := s.txn.again(ctx, "read the group's offsets", func(ctx context.Context) error {
		var err error
		cps, err = s.txn.checkpoints(ctx)
		return transientIf(err)
	})
	return cps, err
}

// transientIf marks err transient when it may pass by itself (retriable).
func transientIf(err error) error {
	if err != nil && retriable(err) {
		return &sinks.TransientError{Err: err}
	}
	return err
}

// ResetCheckpoints commits each partition's range start for the group on
// the target cluster (a fresh run must not resume from an earlier run's
// offsets); nothing for other sinks, groups and topics.
func (s *Sink) ResetCheckpoints(ctx context.Context, group, topic string) error {
	if s.txn == nil || group != s.txn.group || topic != s.txn.topic {
		return nil
	}
	starts := map[int32]int64{}
	for _, p := range s.txn.partitions() {
		if start := rangeStart(s.txn.meta(p)); start >= 0 {
			starts[p] = start
		}
	}
	return s.txn.again(ctx, "reset the group's offsets", func(ctx context.Context) error { return transientIf(s.txn.reset(ctx, starts)) })
}
