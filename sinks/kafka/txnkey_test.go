package kafka_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

// An exactly-once message carries the source record's own key (a null key
// stays null, an empty key stays empty) and the idempotency key in the
// replay-key header; without keep_partition a keyed record goes where the
// Java producer's murmur2 puts its key, and a key-less one to its source
// partition modulo the target's partitions (its source order kept).
func TestKafkaExactlyOnceKeepsTheSourceKey(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 8)
	topic := createTopic(t, addr, 3, nil)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: "keys-" + topic, Group: "replay.keys",
		SourceTopic: "orders", CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"keys","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]record.Record{} // by the idempotency key
	for _, p := range []int32{0, 4, 5} {
		var batch []record.Record
		for o := int64(0); o < 12; o++ {
			r := rec(p, o, "", fmt.Sprintf("v%d/%d", p, o))
			switch o % 3 {
			case 1:
				r.Key = []byte{}
			case 2:
				r.Key = []byte(fmt.Sprintf("customer-%d", o))
			}
			r.Headers = []record.Header{{Key: "trace", Value: []byte("t")}}
			batch = append(batch, r)
			want[fmt.Sprintf("orders/%d/%d", p, o)] = r
		}
		mustWrite(t, s, batch...)
	}
	java := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	got := readIsolated(t, addr, topic, kgo.ReadCommitted())
	if len(got) != len(want) {
		t.Fatalf("read_committed: %d messages, want %d", len(got), len(want))
	}
	last := map[int32]int64{}
	for _, m := range got {
		own, prov := provenance(t, m)
		src, ok := want[prov[kafkasink.HeaderKey]]
		switch {
		case !ok:
			t.Fatalf("message %d@%d: replay-key %q is no record's idempotency key", m.Partition, m.Offset, prov[kafkasink.HeaderKey])
		case (m.Key == nil) != (src.Key == nil) || !bytes.Equal(m.Key, src.Key):
			t.Fatalf("message %d@%d: key %q (null %v), want the source's %q (null %v)", m.Partition, m.Offset, m.Key, m.Key == nil, src.Key, src.Key == nil)
		case !bytes.Equal(m.Value, src.Value) || len(own) != 1 || !m.Timestamp.Equal(src.Time):
			t.Fatalf("message %d@%d differs from record %d@%d", m.Partition, m.Offset, src.Partition, src.Offset)
		}
		wantPart := src.Partition % 3
		if src.Key != nil {
			wantPart = int32(java.Partition(&kgo.Record{Key: src.Key}, 3))
		}
		if m.Partition != wantPart {
			t.Errorf("record %d@%d (key %q): partition %d, want %d", src.Partition, src.Offset, src.Key, m.Partition, wantPart)
		}
		if src.Key == nil {
			if src.Offset < last[src.Partition] {
				t.Errorf("key-less record %d@%d out of source order", src.Partition, src.Offset)
			}
			last[src.Partition] = src.Offset
		}
	}
}
