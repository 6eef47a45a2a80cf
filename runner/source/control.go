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

// offsetCommit sends offsets as one OffsetCommit to the group's
// coordinator (control), as m or standalone (generation -1, no member id)
// when m is nil, and returns the topic's partitions of the answer with
// kafka-go's errors.
func (c *Cluster) offsetCommit(ctx context.Context, m *Member, group, topic string, offsets map[int32]Commit) ([]kafka.OffsetCommitPartition, error) {
	cl, err := c.control()
	if err != nil {
		return nil, err
	}
	kr := kmsg.NewPtrOffsetCommitRequest()
	kr.Group, kr.Generation, kr.MemberID = group, -1, ""
	if m != nil {
		kr.Generation, kr.MemberID = m.Generation, m.ID
	}
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		kp := kmsg.NewOffsetCommitRequestTopicPartition()
		kp.Partition, kp.Offset, kp.Metadata = p, o.Offset, kmsg.StringPtr(o.Metadata)
		t.Partitions = append(t.Partitions, kp)
	}
	kr.Topics = []kmsg.OffsetCommitRequestTopic{t}
	resp, err := kr.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []kafka.OffsetCommitPartition
	got := map[int32]bool{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if rt.Topic != topic {
				continue
			}
			pr := kafka.OffsetCommitPartition{Partition: int(p.Partition)}
			if p.ErrorCode != 0 {
				pr.Error = kafka.Error(p.ErrorCode)
			}
			out, got[p.Partition] = append(out, pr), true
		}
	}
	for p := range offsets { // a partition the answer leaves out was not committed
		if !got[p] {
			return nil, fmt.Errorf("%s/%d: the coordinator's answer does not mention the partition: %w", topic, p, ErrNoAnswer)
		}
	}
	return out, nil
}
