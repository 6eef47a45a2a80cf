package source

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The few requests kafka-go v0.4.51 cannot make (it knows Metadata up to
// v8, before topic IDs, and no API key above 51) go through a franz-go
// client of the same brokers, TLS and SASL settings, made on first use.
// They go through call like every other request.

// asKafkaError maps a franz-go broker error to kafka-go's type, which call
// classifies by Kafka's retriable flag.
func asKafkaError(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return kafka.Error(ke.Code)
	}
	return err
}

// TopicID returns the topic's ID (KIP-516, Metadata v10+) in Kafka's
// notation (URL-safe base64 of the 16 bytes, unpadded, as kafka-topics
// prints it), or "" when the brokers report none (before Kafka 2.8).
func (c *Cluster) TopicID(ctx context.Context, topic string) (string, error) {
	id, err := call(ctx, c, "metadata", func(ctx context.Context) ([16]byte, error) {
		cl, err := c.control()
		if err != nil {
			return [16]byte{}, err
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return [16]byte{}, asKafkaError(err)
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != topic {
				continue
			}
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return [16]byte{}, fmt.Errorf("topic %s: %w", topic, asKafkaError(err))
			}
			return t.TopicID, nil
		}
		return [16]byte{}, fmt.Errorf("topic %s: not in the metadata answer", topic)
	})
	if err != nil {
		return "", fmt.Errorf("topic id of %s: %w", topic, err)
	}
	if id == ([16]byte{}) {
		return "", nil
	}
	return base64.RawURLEncoding.EncodeToString(id[:]), nil
}

// Producer is a producer with a transaction open on a partition, as the
// partition's leader describes it (DescribeProducers, KIP-664), with its
// transactional id when the transaction coordinators tell it
// (ListTransactions).
type Producer struct {
	ID    int64 `json:"producer_id"`
	Epoch int32 `json:"producer_epoch"`
	// TransactionalID is "" when unknown.
	TransactionalID string `json:"transactional_id,omitempty"`
	// TxnStartOffset is the first offset of its open transaction.
	TxnStartOffset int64 `json:"transaction_start_offset"`
	// LastWrite is when it last wrote to the partition (zero when unknown).
	LastWrite time.Time `json:"last_write,omitzero"`
}

func (p Producer) String() string {
	s := fmt.Sprintf("producer id %d (epoch %d", p.ID, p.Epoch)
	if p.TransactionalID != "" {
		s += ", transactional id " + p.TransactionalID
	}
	s += fmt.Sprintf("), its transaction open since offset %d", p.TxnStartOffset)
	if !p.LastWrite.IsZero() {
		s += ", last write " + p.LastWrite.UTC().Format(time.RFC3339)
	}
	return s
}

// OpenProducers returns the producers with a transaction open on the
// partition, by the offset their transaction started at. It is best effort
// for messages: a broker that does not support DescribeProducers, or a
// principal without the right to ask, gives none and an error.
func (c *Cluster) OpenProducers(ctx context.Context, topic string, partition int32) ([]Producer, error) {
	cl, err := c.control()
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describe producers of %s/%d: %w", topic, partition, err)
	}
	var out []Producer
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("describe producers of %s/%d: %w", topic, partition, err)
			}
			for _, ap := range p.ActiveProducers {
				if ap.CurrentTxnStartOffset < 0 {
					continue // no transaction open
				}
				pr := Producer{ID: ap.ProducerID, Epoch: ap.ProducerEpoch, TxnStartOffset: ap.CurrentTxnStartOffset}
				if ap.LastTimestamp > 0 {
					pr.LastWrite = time.UnixMilli(ap.LastTimestamp).UTC()
				}
				out = append(out, pr)
			}
		}
	}
	slices.SortFunc(out, func(a, b Producer) int { return cmp.Compare(a.TxnStartOffset, b.TxnStartOffset) })
	c.nameProducers(ctx, cl, out)
	return out, nil
}

// nameProducers fills in the transactional ids of ps (ListTransactions,
// KIP-664), as far as the coordinators answer.
func (c *Cluster) nameProducers(ctx context.Context, cl *kgo.Client, ps []Producer) {
	if len(ps) == 0 {
		return
	}
	req := kmsg.NewPtrListTransactionsRequest()
	for _, p := range ps {
		req.ProducerIDFilters = append(req.ProducerIDFilters, p.ID)
	}
	for _, sh := range cl.RequestSharded(ctx, req) {
		resp, ok := sh.Resp.(*kmsg.ListTransactionsResponse)
		if sh.Err != nil || !ok {
			continue
		}
		for _, ts := range resp.TransactionStates {
			for i := range ps {
				if ps[i].ID == ts.ProducerID {
					ps[i].TransactionalID = ts.TransactionalID
				}
			}
		}
	}
}
