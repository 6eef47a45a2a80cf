package source

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// control returns the franz-go client that carries the requests kafka-go
// cannot batch or route well at scale: OffsetCommit (to the group
// coordinator, which the client caches and forgets on NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE, instead of one FindCoordinator per commit)
// and ListOffsets (one request per partition leader carrying all its
// partitions, instead of one per partition). It keeps one connection per
// broker, reused by every request. Its own retries are off: call retries,
// under the plan's budget.
func (c *Cluster) control() (*kgo.Client, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if c.ctl != nil {
		return c.ctl, nil
	}
	opts, err := c.conn.KgoOpts(c.Brokers...)
	if err != nil {
		return nil, err
	}
	// OffsetCommit v10 names topics by id only: replay commits by name.
	vs := kversion.Stable()
	if v, ok := vs.LookupMaxKeyVersion(int16(kmsg.OffsetCommit)); ok && v > 9 {
		vs.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	}
	opts = append(opts, kgo.RequestRetries(0), kgo.MetadataMinAge(time.Second), kgo.DialTimeout(10*time.Second), kgo.MaxVersions(vs))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	c.ctl = cl
	return cl, nil
}

// closeControl closes the control client, if it was started.
func (c *Cluster) closeControl() {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if c.ctl != nil {
		c.ctl.Close()
		c.ctl = nil
	}
}

// offsetCommit sends req as one OffsetCommit to the group's coordinator
// (control) and returns the answer with kafka-go's errors per partition.
func (c *Cluster) offsetCommit(ctx context.Context, req *kafka.OffsetCommitRequest) (*kafka.OffsetCommitResponse, error) {
	cl, err := c.control()
	if err != nil {
		return nil, err
	}
	kr := kmsg.NewPtrOffsetCommitRequest()
	kr.Group, kr.Generation, kr.MemberID = req.GroupID, int32(req.GenerationID), req.MemberID
	for topic, commits := range req.Topics {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		for _, oc := range commits {
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = int32(oc.Partition), oc.Offset
			meta := oc.Metadata
			p.Metadata = &meta
			t.Partitions = append(t.Partitions, p)
		}
		kr.Topics = append(kr.Topics, t)
	}
	resp, err := kr.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := &kafka.OffsetCommitResponse{Throttle: time.Duration(resp.ThrottleMillis) * time.Millisecond, Topics: map[string][]kafka.OffsetCommitPartition{}}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			pr := kafka.OffsetCommitPartition{Partition: int(p.Partition)}
			if p.ErrorCode != 0 {
				pr.Error = kafka.Error(p.ErrorCode)
			}
			out.Topics[t.Topic] = append(out.Topics[t.Topic], pr)
		}
	}
	// A partition the answer leaves out was not committed.
	for topic, commits := range req.Topics {
		got := map[int]bool{}
		for _, pr := range out.Topics[topic] {
			got[pr.Partition] = true
		}
		for _, oc := range commits {
			if !got[oc.Partition] {
				return nil, fmt.Errorf("%s/%d: the coordinator's answer does not mention the partition: %w", topic, oc.Partition, ErrNoAnswer)
			}
		}
	}
	return out, nil
}

// listOffsetsBatched answers reqs (kafka-go's form: FirstOffsetOf,
// LastOffsetOf, TimeOffsetOf) as kafka-go's Client.ListOffsets does, with
// one ListOffsets per partition leader (control) and per round: a
// partition asked for twice (its first and last offsets) goes in two
// rounds, since a broker refuses a partition twice in one request. A
// request that fails on the way (a dropped connection, a timeout) is an
// error of the whole call, never a partition's UNKNOWN_SERVER_ERROR.
func (c *Cluster) listOffsetsBatched(ctx context.Context, topic string, reqs []kafka.OffsetRequest, level kafka.IsolationLevel) (*kafka.ListOffsetsResponse, error) {
	cl, err := c.control()
	if err != nil {
		return nil, err
	}
	parts := map[int]*kafka.PartitionOffsets{}
	var rounds [][]kafka.OffsetRequest
	seen := map[int]int{}
	for _, r := range reqs {
		i := seen[r.Partition]
		seen[r.Partition]++
		if i == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[i] = append(rounds[i], r)
		if parts[r.Partition] == nil {
			parts[r.Partition] = &kafka.PartitionOffsets{Partition: r.Partition, FirstOffset: -1, LastOffset: -1, Offsets: map[int64]time.Time{}}
		}
	}
	for _, round := range rounds {
		kr := kmsg.NewPtrListOffsetsRequest()
		kr.IsolationLevel = int8(level)
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = topic
		asked := map[int32]int64{}
		for _, r := range round {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp = int32(r.Partition), r.Timestamp
			t.Partitions = append(t.Partitions, p)
			asked[int32(r.Partition)] = r.Timestamp
		}
		kr.Topics = []kmsg.ListOffsetsRequestTopic{t}
		resp, err := kr.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		for _, rt := range resp.Topics {
			if rt.Topic != topic {
				continue
			}
			for _, rp := range rt.Partitions {
				po := parts[int(rp.Partition)]
				ts, ok := asked[rp.Partition]
				if po == nil || !ok {
					continue
				}
				delete(asked, rp.Partition)
				if rp.ErrorCode != 0 {
					po.Error = kafka.Error(rp.ErrorCode)
					continue
				}
				switch ts {
				case kafka.FirstOffset:
					po.FirstOffset = rp.Offset
				case kafka.LastOffset:
					po.LastOffset = rp.Offset
				default:
					po.Offsets[rp.Offset] = time.UnixMilli(rp.Timestamp)
				}
			}
		}
		for p := range asked { // left out of the answer
			parts[int(p)].Error = kafka.Unknown
		}
	}
	out := &kafka.ListOffsetsResponse{Topics: map[string][]kafka.PartitionOffsets{}}
	for _, po := range parts {
		out.Topics[topic] = append(out.Topics[topic], *po)
	}
	return out, nil
}
