package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// Offsets are one partition's offsets at one moment.
type Offsets struct {
	// LogStart is the first offset still stored.
	LogStart int64
	// HighWatermark is the offset after the last replicated record.
	HighWatermark int64
	// LastStable is the read_committed upper bound (KIP-98); equal to the
	// high watermark under read_uncommitted.
	LastStable int64
}

// Partitions returns the topic's partition numbers, sorted. A topic that
// does not exist (or has no partition) is an error naming the brokers.
func (c *Cluster) Partitions(ctx context.Context, topic string) ([]int32, error) {
	md, err := call(ctx, c, "metadata", func(ctx context.Context) (*kafka.MetadataResponse, error) {
		md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return nil, err
		}
		for _, t := range md.Topics {
			// A topic without a leader yet (LEADER_NOT_AVAILABLE) is retried;
			// an unknown topic is the plan's mistake and fails at once.
			if t.Name == topic && t.Error != nil && !errors.Is(t.Error, kafka.UnknownTopicOrPartition) && retriable(t.Error) {
				return nil, fmt.Errorf("topic %s: %w", topic, t.Error)
			}
		}
		return md, nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata for topic %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
				return nil, c.unknownTopic(ctx, topic)
			}
			return nil, fmt.Errorf("metadata for topic %s: %w", topic, aclNeeded("metadata", t.Error))
		}
		if len(t.Partitions) == 0 {
			break
		}
		return partitionIDs(t.Partitions), nil
	}
	return nil, c.unknownTopic(ctx, topic)
}

// unknownTopic is the error of a topic the cluster does not have, naming
// the topic it has that is closest to it when one is close enough to be a
// typo (one Metadata request for every topic, not retried: the error is
// the same without it).
func (c *Cluster) unknownTopic(ctx context.Context, topic string) error {
	hint := ""
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cl, err := c.control(); err == nil {
		var names []string
		if md, err := kmsg.NewPtrMetadataRequest().RequestWith(lctx, cl); err == nil { // no topics named: every topic
			for _, t := range md.Topics {
				if t.Topic != nil && !strings.HasPrefix(*t.Topic, "__") && t.ErrorCode == 0 {
					names = append(names, *t.Topic)
				}
			}
		}
		slices.Sort(names)
		if s := plan.Suggest(topic, names); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
	}
	return fmt.Errorf("topic %s does not exist on %v%s: check the plan's topics (source.topic or source.topics) and source.brokers", topic, c.Brokers, hint)
}

// FreshPartitions asks a broker for the topic's partitions, bypassing the
// Transport's metadata cache (MetadataTTL), which would hide partitions
// created in the last seconds.
func (c *Cluster) FreshPartitions(ctx context.Context, topic string) ([]int32, error) {
	var errs []error
	for _, b := range c.Brokers {
		ps, err := call(ctx, c, "read partitions", func(ctx context.Context) ([]kafka.Partition, error) {
			conn, err := c.conn.Dialer.DialContext(ctx, "tcp", b)
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			if dl, ok := ctx.Deadline(); ok {
				_ = conn.SetDeadline(dl)
			}
			return conn.ReadPartitions(topic)
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return partitionIDs(ps), nil
	}
	return nil, fmt.Errorf("partitions of %s: %w", topic, errors.Join(errs...))
}

// partitionIDs are the numbers of ps, sorted.
func partitionIDs(ps []kafka.Partition) []int32 {
	parts := make([]int32, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, int32(p.ID))
	}
	slices.Sort(parts)
	return parts
}

// isolationLevel is a Fetch's and a ListOffsets' isolation level for
// plan.ReadCommitted or plan.ReadUncommitted.
func isolationLevel(iso string) int8 {
	if iso == plan.ReadUncommitted {
		return 0
	}
	return 1
}

// ListOffsets returns each partition's log start offset, high watermark
// and last stable offset under isolation (plan.ReadCommitted or
// plan.ReadUncommitted).
func (c *Cluster) ListOffsets(ctx context.Context, topic string, parts []int32, isolation string) (map[int32]Offsets, error) {
	ru, err := c.listOffsets(ctx, topic, parts, 0, kafka.FirstOffset, kafka.LastOffset)
	if err != nil {
		return nil, err
	}
	stable := ru[1]
	if isolation == plan.ReadCommitted {
		rc, err := c.listOffsets(ctx, topic, parts, 1, kafka.LastOffset)
		if err != nil {
			return nil, err
		}
		stable = rc[0]
	}
	out := make(map[int32]Offsets, len(parts))
	for _, p := range parts {
		o := Offsets{LogStart: ru[0][p], HighWatermark: ru[1][p], LastStable: stable[p]}
		if o.LastStable < 0 || o.LastStable > o.HighWatermark {
			o.LastStable = o.HighWatermark
		}
		out[p] = o
	}
	return out, nil
}

// OffsetsAt returns, per partition, the first offset whose timestamp is
// >= t, or -1 when there is none (ListOffsets by timestamp, KIP-79).
func (c *Cluster) OffsetsAt(ctx context.Context, topic string, parts []int32, t time.Time, isolation string) (map[int32]int64, error) {
	var ms int64
	if !t.IsZero() {
		ms = t.UnixNano() / int64(time.Millisecond)
	}
	offs, err := c.listOffsets(ctx, topic, parts, isolationLevel(isolation), ms)
	if err != nil {
		return nil, err
	}
	return offs[0], nil
}

// listOffsets returns, for each of stamps (kafka.FirstOffset,
// kafka.LastOffset or a time in ms), the partitions' offsets under level.
// Each attempt sends one ListOffsets per stamp, which the control client
// splits into one request per partition leader: a broker refuses a
// partition twice in one request. A partition an answer leaves out, or
// gives UNKNOWN_SERVER_ERROR, is ErrNoAnswer; a request that fails on the
// way is an error of the whole call.
func (c *Cluster) listOffsets(ctx context.Context, topic string, parts []int32, level int8, stamps ...int64) ([]map[int32]int64, error) {
	asked := make(map[int32]bool, len(parts))
	for _, p := range parts {
		asked[p] = true
	}
	var failed error // a partition's error that a retry does not pass
	out, err := call(ctx, c, "list offsets", func(ctx context.Context) ([]map[int32]int64, error) {
		cl, err := c.control()
		if err != nil {
			return nil, err
		}
		failed = nil
		out := make([]map[int32]int64, len(stamps))
		for i, ts := range stamps {
			req := kmsg.NewPtrListOffsetsRequest()
			req.IsolationLevel = level
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp = p, ts
				t.Partitions = append(t.Partitions, rp)
			}
			req.Topics = []kmsg.ListOffsetsRequestTopic{t}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return nil, err
			}
			out[i] = make(map[int32]int64, len(parts))
			codes := make(map[int32]int16, len(parts))
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if _, seen := codes[rp.Partition]; rt.Topic == topic && asked[rp.Partition] && !seen {
						codes[rp.Partition], out[i][rp.Partition] = rp.ErrorCode, rp.Offset
					}
				}
			}
			for _, p := range parts {
				code, ok := codes[p]
				var perr error = kafka.Error(code)
				if !ok || code == -1 { // left out, or UNKNOWN_SERVER_ERROR
					perr = ErrNoAnswer
				} else if code == 0 {
					continue
				}
				if retriable(perr) {
					return nil, fmt.Errorf("partition %d: %w", p, perr) // call retries the whole request
				}
				if failed == nil {
					failed = fmt.Errorf("list offsets of %s/%d: %w", topic, p, perr)
				}
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	return out, failed
}

// FirstRecordTime returns the timestamp of the first record at or after
// offset (the zero time when the partition has none).
func (c *Cluster) FirstRecordTime(ctx context.Context, topic string, partition int32, offset int64, isolation string) (time.Time, error) {
	r := c.NewReader(ReaderConfig{Topic: topic, Partition: partition, Isolation: isolation, Start: offset, End: offset + 1<<20})
	for i := 0; i < 5; i++ {
		recs, err := r.Fetch(ctx, nil)
		if err != nil {
			return time.Time{}, err
		}
		if len(recs) > 0 {
			return recs[0].Time, nil
		}
	}
	return time.Time{}, nil
}

// LastRecords reads the records of [max(from, end-n), end), at most five
// fetches' worth: what a caller inspects to explain an empty time lookup.
func (c *Cluster) LastRecords(ctx context.Context, topic string, partition int32, from, end int64, n int64, isolation string) ([]record.Record, error) {
	r := c.NewReader(ReaderConfig{Topic: topic, Partition: partition, Isolation: isolation, Start: max(from, end-n), End: end})
	var recs []record.Record
	for i := 0; i < 5 && !r.Done(); i++ {
		var err error
		if recs, err = r.Fetch(ctx, recs); err != nil {
			return recs, err
		}
	}
	return recs, nil
}

// ErrNoAnswer is a request that got no answer: kafka-go reports a
// ListOffsets sub-request that failed on the way (a dropped connection, a
// timeout) as the partition's UNKNOWN_SERVER_ERROR (-1), dropping the real
// error. It is retried like a dropped connection.
var ErrNoAnswer = errors.New("no answer from the broker for the partition (the connection dropped or the request timed out)")
