package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/replay-tool/replay/sinks"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offsetsTopic is Kafka's internal topic of the groups' offsets, where a
// transaction's offset commits (TxnOffsetCommit) wait for its marker.
const offsetsTopic = "__consumer_offsets"

// abortHanging aborts the hanging transactions of the producers of parts
// on the target cluster: transactions of a producer's id, under an epoch
// older than the one its InitProducerID gave it, still open on a partition
// of the target topic or of the offsets topic. The transaction coordinator
// has forgotten them (it completed every transaction it knew of before
// that InitProducerID returned), so no marker will ever close them: they
// hold the partition's last stable offset, hiding every later record from
// read_committed consumers, and the group's offset UNSTABLE_OFFSET_COMMIT,
// forever. Apache Kafka 4 leaves such a transaction when a broker is killed
// during one. Aborting is the only outcome consistent with the
// coordinator's: a transaction it never knew of never committed. The
// markers are written with WriteTxnMarkers (KIP-664), which needs the
// ClusterAction right; without it the error names Kafka's own tool to do
// it. It returns how many were aborted.
func (t *txnCommitter) abortHanging(ctx context.Context, parts ...int32) (int, error) {
	ours, err := t.currentEpochs(ctx, parts)
	if err != nil || len(ours) == 0 {
		return 0, err
	}
	described, err := t.admin.DescribeProducers(ctx, kadm.TopicsSet{t.target: nil, offsetsTopic: nil})
	if err != nil {
		// A broker before Kafka 2.8, or a principal without Describe on
		// the topics: nothing can be looked for, and nothing is changed.
		t.log.Debug().Err(err).Str("target", t.where).Msg("kafka sink: cannot look for hanging transactions (DescribeProducers)")
		return 0, nil
	}
	var markers []kadm.TxnMarkers
	var where, ids []string
	described.EachPartition(func(dp kadm.DescribedProducersPartition) {
		for _, pr := range dp.ActiveProducers {
			cur, ok := ours[pr.ProducerID]
			if !ok || pr.ProducerEpoch >= cur.epoch || pr.CurrentTxnStartOffset < 0 {
				continue
			}
			ids = append(ids, t.id(cur.p))
			ts := kadm.TopicsSet{}
			ts.Add(dp.Topic, dp.Partition)
			markers = append(markers, kadm.TxnMarkers{ProducerID: pr.ProducerID, ProducerEpoch: pr.ProducerEpoch,
				CoordinatorEpoch: pr.CoordinatorEpoch, Topics: ts})
			where = append(where, fmt.Sprintf("%s/%d (producer %d epoch %d, open since offset %d)", dp.Topic, dp.Partition, pr.ProducerID, pr.ProducerEpoch, pr.CurrentTxnStartOffset))
		}
	})
	if len(markers) == 0 {
		return 0, nil
	}
	t.log.Warn().Strs("transactional_ids", ids).Strs("hanging", where).
		Msg("kafka sink: transactions of this producer's earlier epochs are open on partitions its coordinator no longer knows of (a broker was killed during them): aborting them")
	if err := t.writeAborts(ctx, markers, ids); err != nil {
		return 0, err
	}
	return len(markers), nil
}

// producerEpoch is the epoch InitProducerID gave the producer of a
// partition p.
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

// writeAborts writes the abort markers of the hanging transactions of
// the producers ids. A failure names Kafka's own tool to abort them; it
// is transient unless the ClusterAction right is missing.
func (t *txnCommitter) writeAborts(ctx context.Context, markers []kadm.TxnMarkers, ids []string) error {
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
	err = fmt.Errorf("kafka sink: abort the hanging transactions of %s on %s%s: %w; an administrator can abort them with Kafka's own tool: %s",
		strings.Join(ids, ", "), t.where, why, err, strings.Join(cmds, "; "))
	if why != "" {
		return err // a right only an administrator can grant
	}
	return &sinks.TransientError{Err: err} // a coordinator moving, a dropped connection: tried again
}
