package record

import (
	"slices"
	"testing"
)

// Partitions sort by topic first, then by number (10 after 9, not after
// 1), and name themselves as topic/partition.
func TestTopicPartitionOrderAndName(t *testing.T) {
	tps := []TopicPartition{{"orders", 10}, {"audit", 2}, {"orders", 9}, {"orders", 1}, {"audit", 0}}
	slices.SortFunc(tps, TopicPartition.Compare)
	want := []TopicPartition{{"audit", 0}, {"audit", 2}, {"orders", 1}, {"orders", 9}, {"orders", 10}}
	if !slices.Equal(tps, want) {
		t.Fatalf("sorted %v, want %v", tps, want)
	}
	if got := (TopicPartition{"orders", 3}).String(); got != "orders/3" {
		t.Fatalf("String: %q, want orders/3", got)
	}
	r := Record{Topic: "orders", Partition: 4, Offset: 7}
	if got := r.TopicPartition(); got != (TopicPartition{"orders", 4}) {
		t.Fatalf("Record.TopicPartition: %v", got)
	}
}
