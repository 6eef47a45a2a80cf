package record

import (
	"cmp"
	"fmt"
	"strings"
)

// TopicPartition identifies one partition of one topic: the key of what a
// run keeps per partition (ranges, checkpoints, commits, counters), so
// that a plan reading several topics needs no other key than one reading
// a single topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String names tp as replay's messages do: topic/partition.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Compare orders partitions by topic, then by partition number: it returns
// -1, 0 or +1 as tp sorts before, with or after o (for slices.SortFunc).
func (tp TopicPartition) Compare(o TopicPartition) int {
	return cmp.Or(strings.Compare(tp.Topic, o.Topic), cmp.Compare(tp.Partition, o.Partition))
}

// TopicPartition is the partition r was read from.
func (r *Record) TopicPartition() TopicPartition {
	return TopicPartition{Topic: r.Topic, Partition: r.Partition}
}
