package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetsTopic is Kafka's internal topic of the groups' offsets, where a
// transaction's offset commits (TxnOffsetCommit) wait for its marker.
const offsetsTopic = "__consumer_offsets"

// hangingGrace is how long a transaction of an earlier epoch must be seen
// open, with its coordinator completing nothing, before abortHanging takes
// it for forgotten: a restarted coordinator may still be writing the
// markers of a transaction it committed.
const hangingGrace = 10 * time.Second

// abortHanging ends the hanging transactions of the producers of parts on
// the target cluster: transactions of a producer's id under an older epoch,
// still open on a partition of the target topic or of the offsets topic,
// that the transaction coordinator has forgotten (Apache Kafka 4 leaves
// them when a broker is killed during one). They would hide every later
// record from read_committed consumers, and hold the group's offset
// UNSTABLE_OFFSET_COMMIT, forever. Until notForgotten agrees, it fails
// transient. Each is ended as outcome says, by WriteTxnMarkers (KIP-664,
// the ClusterAction right). It returns how many were ended.
func (t *txnCommitter) abortHanging(ctx context.Context, parts ...int32) (int, error) {
	ours, err := t.currentEpochs(ctx, parts)
	if err != nil || len(ours) == 0 {
		return 0, err
	}
	described, err := t.admin.DescribeProducers(ctx, kadm.TopicsSet{t.target: nil, offsetsTopic: nil})
	if err != nil {
		t.log.Debug().Err(err).Str("target", t.where).Msg("kafka sink: cannot look for hanging transactions (DescribeProducers)")
		return 0, nil
	}
	var found []hangingTxn
	described.EachPartition(func(dp kadm.DescribedProducersPartition) {
		for _, pr := range dp.ActiveProducers {
			cur, ok := ours[pr.ProducerID]
			if !ok || pr.ProducerEpoch >= cur.epoch || pr.CurrentTxnStartOffset < 0 {
				continue
			}
			found = append(found, hangingTxn{id: t.id(cur.p), topic: dp.Topic, partition: dp.Partition, pr: pr})
		}
	})
	if len(found) == 0 {
		return 0, nil
	}
	if wait := t.notForgotten(ctx, found); wait != "" {
		return 0, &sinks.TransientError{Err: fmt.Errorf("kafka sink: transactions of earlier epochs are open on %s; waiting before taking them for hanging: %s", t.where, wait)}
	}
	wrote := producerParts(described, t.target)
	var markers []kadm.TxnMarkers
	var where, ids []string
	for _, h := range found {
		commit, why, err := t.outcome(ctx, h, found, wrote[h.pr.ProducerID], ours[h.pr.ProducerID].p)
		if err != nil {
			return 0, err
		}
		ids = append(ids, h.id)
		markers = append(markers, kadm.TxnMarkers{ProducerID: h.pr.ProducerID, ProducerEpoch: h.pr.ProducerEpoch,
			CoordinatorEpoch: h.pr.CoordinatorEpoch, Commit: commit, Topics: kadm.TopicsSet{h.topic: {h.partition: {}}}})
		end := "abort"
		if commit {
			end = "commit"
		}
		where = append(where, fmt.Sprintf("%s: %s (%s)", h, end, why))
	}
	t.log.Warn().Strs("transactional_ids", ids).Strs("hanging", where).
		Msg("kafka sink: transactions of this producer's earlier epochs are open on partitions its coordinator no longer knows of (a broker was killed during them): ending them as the group's offsets say they ended")
	if err := t.writeMarkers(ctx, markers, ids); err != nil {
		return 0, err
	}
	return len(markers), nil
}

// outcome decides how a forgotten transaction h of the producer of source
// partition p ended; its records and the group's offset after them were
// one transaction. When its offset commit is open too (h is on the offsets
// topic, or another open part of it is), it committed if records of it
// (its producer id and epoch, source offsets at or past the group's
// offset for p) are visible to read_committed consumers on one of the
// target partitions parts, where its producer wrote: their marker was
// written; else nothing of it committed. When its offset commit was
// marked, it committed if the group's offset for p is past the source
// offset of its first record. Else it is aborted.
func (t *txnCommitter) outcome(ctx context.Context, h hangingTxn, all []hangingTxn, parts []int32, p int32) (commit bool, why string, err error) {
	if h.topic == offsetsTopic || slices.ContainsFunc(all, func(o hangingTxn) bool {
		return o.topic == offsetsTopic && o.pr.ProducerID == h.pr.ProducerID && o.pr.ProducerEpoch == h.pr.ProducerEpoch
	}) {
		off, err := t.committedOffset(ctx, p)
		if err != nil {
			return false, "", transientIf(err)
		}
		at, src, err := t.visibleRecord(ctx, h, parts, off)
		if err != nil {
			return false, "", &sinks.TransientError{Err: fmt.Errorf("kafka sink: look for the visible records of the open transaction %s: %w", h, err)}
		}
		if at != "" {
			return true, fmt.Sprintf("its offset commit is open, but its record at %s (source offset %d, the group's offset for %s/%d being %d) is visible to read_committed: its commit was marked there", at, src, t.topic, p, off), nil
		}
		return false, "its offset commit is open too, and none of its records is visible to read_committed: nothing of it committed", nil
	}
	src, err := t.firstSourceOffset(ctx, h)
	if err != nil {
		return false, "", &sinks.TransientError{Err: fmt.Errorf("kafka sink: read the first record of the open transaction %s: %w", h, err)}
	}
	if src < 0 {
		return false, "its first record names no source offset", nil
	}
	off, err := t.committedOffset(ctx, p)
	if err != nil {
		return false, "", transientIf(err)
	}
	if off > src {
		return true, fmt.Sprintf("the group's offset %d for %s/%d is past its first record's source offset %d: its offsets committed", off, t.topic, p, src), nil
	}
	return false, fmt.Sprintf("the group's offset %d for %s/%d is not past its first record's source offset %d", off, t.topic, p, src), nil
}

// firstSourceOffset reads the first record of the open transaction h and
// returns its replay-source-offset header, or -1 when it has none.
func (t *txnCommitter) firstSourceOffset(ctx context.Context, h hangingTxn) (int64, error) {
	cl, err := kgo.NewClient(append(t.base[:len(t.base):len(t.base)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{h.topic: {h.partition: kgo.NewOffset().At(h.pr.CurrentTxnStartOffset)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			return 0, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, errs[0].Err
		}
		var rec *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if rec == nil && r.Offset >= h.pr.CurrentTxnStartOffset && r.ProducerID == h.pr.ProducerID {
				rec = r
			}
		})
		if rec != nil {
			return sourceOffset(rec), nil
		}
	}
}

// committedOffset is the group's committed offset for source partition p
// on the target cluster (OffsetFetch without waiting for transactions),
// -1 when it has none.
func (t *txnCommitter) committedOffset(ctx context.Context, p int32) (int64, error) {
	off := int64(-1)
	err := t.retryRequest(ctx, "OffsetFetch of group "+t.group, func() error {
		resp, err := t.admin.FetchOffsets(ctx, t.group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if o, ok := resp.Lookup(t.topic, p); ok && o.Err == nil {
			off = o.At
		}
		return nil
	})
	return off, err
}

// hangingTxn is a transaction of an earlier epoch of the producer of
// transactional id id, open on topic/partition.
type hangingTxn struct {
	id        string
	topic     string
	partition int32
	pr        kadm.DescribedProducer
}

func (h hangingTxn) String() string {
	return fmt.Sprintf("%s/%d (producer %d epoch %d, open since offset %d)", h.topic, h.partition, h.pr.ProducerID, h.pr.ProducerEpoch, h.pr.CurrentTxnStartOffset)
}

// key names the open transaction (a later one of the same producer on the
// partition has another start offset).
func (h hangingTxn) key() string {
	return fmt.Sprintf("%s/%d/%d/%d/%d", h.topic, h.partition, h.pr.ProducerID, h.pr.ProducerEpoch, h.pr.CurrentTxnStartOffset)
}

// notForgotten says why found cannot be taken for forgotten yet ("" when
// every one can): its coordinator is completing a transaction of its id,
// has it open, cannot be asked, or it was first seen open less than
// hangingGrace ago.
func (t *txnCommitter) notForgotten(ctx context.Context, found []hangingTxn) string {
	var ids []string
	for _, h := range found {
		if !slices.Contains(ids, h.id) {
			ids = append(ids, h.id)
		}
	}
	txns, err := t.admin.DescribeTransactions(ctx, ids...)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var why []string
	for _, h := range found {
		seen, ok := t.hangingSeen[h.key()]
		if !ok {
			seen = now
			t.hangingSeen[h.key()] = now
		}
		d, described := txns[h.id]
		switch {
		case err != nil || !described || d.Err != nil:
			why = append(why, fmt.Sprintf("%s: its coordinator cannot be asked (%v)", h, errors.Join(err, d.Err)))
		case d.State == "PrepareCommit" || d.State == "PrepareAbort" || d.State == "PrepareEpochFence":
			why = append(why, fmt.Sprintf("%s: its coordinator is completing a transaction of %s (%s)", h, h.id, d.State))
		case d.State == "Ongoing" && d.ProducerID == h.pr.ProducerID && d.ProducerEpoch == h.pr.ProducerEpoch:
			why = append(why, fmt.Sprintf("%s: its coordinator has it open", h))
		case now.Sub(seen) < hangingGrace:
			why = append(why, fmt.Sprintf("%s: open for %s of the %s it must stay open before it is taken for forgotten", h, now.Sub(seen).Round(time.Millisecond), hangingGrace))
		}
	}
	return strings.Join(why, "; ")
}

// producerEpoch is the epoch InitProducerID gave the producer of p.
type producerEpoch struct {
	epoch int16
	p     int32
}

// currentEpochs is the producer id and current epoch of the producer of
// each of parts that has one, by producer id.
func (t *txnCommitter) currentEpochs(ctx context.Context, parts []int32) (map[int64]producerEpoch, error) {
	ours := map[int64]producerEpoch{}
	for _, p := range parts {
		t.mu.Lock()
		cl := t.producers[p]
		t.mu.Unlock()
		if cl == nil {
			continue
		}
		id, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			return nil, transientTxn(fmt.Errorf("kafka sink: producer id of %s: %w", t.id(p), err))
		}
		ours[id] = producerEpoch{epoch, p}
	}
	return ours, nil
}

// writeMarkers writes the markers of the hanging transactions of the
// producers ids. A failure names Kafka's own tool to abort them; it is
// transient unless the ClusterAction right is missing.
func (t *txnCommitter) writeMarkers(ctx context.Context, markers []kadm.TxnMarkers, ids []string) error {
	resps, err := t.admin.WriteTxnMarkers(ctx, markers...)
	if err == nil {
		for _, r := range resps {
			r.Topics.EachPartition(func(pr kadm.TxnMarkersPartitionResponse) {
				if pr.Err != nil && err == nil {
					err = fmt.Errorf("%s/%d: %w", pr.Topic, pr.Partition, pr.Err)
				}
			})
		}
	}
	if err == nil {
		return nil
	}
	var cmds []string
	for _, m := range markers {
		if m.Commit {
			continue // Kafka's tool aborts only
		}
		m.Topics.EachPartitions(func(topic string, parts []int32) {
			for _, part := range parts {
				cmds = append(cmds, fmt.Sprintf("kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --producer-id %d --producer-epoch %d --coordinator-epoch %d",
					t.where, topic, part, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch))
			}
		})
	}
	why := ""
	if errors.Is(err, kerr.ClusterAuthorizationFailed) {
		why = " (writing transaction markers needs the ClusterAction right on the cluster)"
	}
	err = fmt.Errorf("kafka sink: end the hanging transactions of %s on %s%s: %w; an administrator can abort those to abort with Kafka's own tool: %s",
		strings.Join(ids, ", "), t.where, why, err, strings.Join(cmds, "; "))
	if why != "" {
		return err // a right only an administrator can grant
	}
	return &sinks.TransientError{Err: err} // a coordinator moving, a dropped connection: tried again
}
