package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stable reads the group's committed offset of p on the target cluster,
// waiting for p's pending transaction (RequireStable, KIP-447), when it is
// this run's.
func (t *txnCommitter) stable(ctx context.Context, p int32) (int64, bool, error) {
	var o kadm.OffsetResponse
	err := t.retryRequest(ctx, "OffsetFetch of group "+t.group, func() error {
		resp, err := t.admin.FetchOffsets(kadm.RequireStable(ctx), t.group)
		if err != nil {
			return err
		}
		var found bool
		if o, found = resp.Lookup(t.topic, p); !found {
			o = kadm.OffsetResponse{Offset: kadm.Offset{At: -1}}
		}
		return o.Err
	})
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return 0, false, nil // no commit yet
	case err != nil:
		return 0, false, fmt.Errorf("kafka sink: read the offset of group %s for %s/%d on %s: %w", t.group, t.topic, p, t.where, err)
	}
	if t.thisRun(p, o) {
		return o.At, true, nil
	}
	return 0, false, nil
}

// thisRun reports whether o, the group's offset of p, was committed by this
// run (its commit metadata is t.meta's) past the range start (where a
// fresh run's or reset's offset says nothing was committed).
func (t *txnCommitter) thisRun(p int32, o kadm.OffsetResponse) bool {
	return o.At >= 0 && o.Metadata != "" && o.Metadata == t.meta(p) && o.At > rangeStart(o.Metadata)
}

// checkpoints returns the offsets of this run the group holds on the
// target cluster for the source topic (RequireStable).
func (t *txnCommitter) checkpoints(ctx context.Context) (map[int32]int64, error) {
	var resp kadm.OffsetResponses
	err := t.retryRequest(ctx, "OffsetFetch of group "+t.group, func() error {
		var err error
		resp, err = t.admin.FetchOffsets(kadm.RequireStable(ctx), t.group)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, nil // no commit yet
	}
	if err != nil {
		return nil, fmt.Errorf("kafka sink: read the offsets of group %s on %s: %w", t.group, t.where, err)
	}
	out := map[int32]int64{}
	for p, o := range resp[t.topic] {
		if o.Err == nil && t.thisRun(p, o) {
			out[p] = o.At
		}
	}
	return out, nil
}

// reset commits each partition's range start for the group on the target
// cluster (a standalone OffsetCommit), so that a fresh run does not resume
// from an earlier run's offsets of the same identity.
func (t *txnCommitter) reset(ctx context.Context, starts map[int32]int64) error {
	if len(starts) == 0 {
		return nil
	}
	os := kadm.Offsets{}
	for _, p := range slices.Sorted(maps.Keys(starts)) {
		os.Add(kadm.Offset{Topic: t.topic, Partition: p, At: starts[p], LeaderEpoch: -1, Metadata: t.meta(p)})
	}
	err := t.retryRequest(ctx, "OffsetCommit of group "+t.group, func() error {
		resp, err := t.admin.CommitOffsets(ctx, t.group, os)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("kafka sink: reset the offsets of group %s on %s: %w", t.group, t.where, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.Copy(t.committed, starts)
	return nil
}

// partitions returns the source partitions the sink knows of: the run's,
// and those it committed offsets for.
func (t *txnCommitter) partitions() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := slices.AppendSeq(slices.Clone(t.parts), maps.Keys(t.committed))
	slices.Sort(all)
	return slices.Compact(all)
}

// rangeStart reads the range start from the runner's commit metadata
// (JSON with "start"); -1 when it has none.
func rangeStart(meta string) int64 {
	var m struct {
		Start *int64 `json:"start"`
	}
	if json.Unmarshal([]byte(meta), &m) != nil || m.Start == nil {
		return -1
	}
	return *m.Start
}

// commitOnly commits next for p in a transaction of p's producer holding
// only the offset, unless the sink's transactions committed next or more
// already. kgo ends only the transactions it produced in: this one ends
// with a raw EndTxn v4 (adminCl), which keeps the producer's epoch.
func (t *txnCommitter) commitOnly(ctx context.Context, p int32, next int64) error {
	done, err := t.settled(ctx, p)
	if err != nil {
		return err
	}
	if done >= next {
		return nil
	}
	cl, err := t.producer(ctx, p)
	if err != nil {
		return err
	}
	err = t.commitOffsets(ctx, cl, t.adminCl, p, next)
	if err == nil {
		err = t.endTxn(ctx, cl, p, true)
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = t.endTxn(actx, cl, p, false)
		if lerr := t.lost(p, cl, err, nil); lerr != nil {
			return lerr
		}
		if fenced(err) {
			t.drop(p, cl)
			return &FencedError{TransactionalID: t.id(p), Err: err}
		}
		return transientTxn(fmt.Errorf("kafka sink: commit the offset of %s/%d on %s (the transaction is aborted): %w", t.topic, p, t.where, err))
	}
	t.mu.Lock()
	t.committed[p] = max(t.committed[p], next)
	t.mu.Unlock()
	return nil
}

// endTxn commits or aborts p's offsets-only transaction (EndTxn).
func (t *txnCommitter) endTxn(ctx context.Context, cl *kgo.Client, p int32, commit bool) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id(p), pid, epoch, commit
	return t.retryRequest(ctx, "EndTxn of "+t.id(p), func() error {
		resp, err := req.RequestWith(ctx, t.adminCl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}
