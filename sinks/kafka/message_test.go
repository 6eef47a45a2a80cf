package kafka_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/replay-tool/replay/sinks/sinktest"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

// Kafka's own vectors for the Java client's murmur2
// (org.apache.kafka.common.utils.UtilsTest.testMurmur2).
func TestMurmur2JavaVectors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want int32
	}{
		{[]byte("21"), -973932308},
		{[]byte("foobar"), -790332482},
		{[]byte("a-little-bit-long-string"), -985981536},
		{[]byte("a-little-bit-longer-string"), -1486304829},
		{[]byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
		{[]byte{'a', 'b', 'c'}, 479470107},
	} {
		if got := kafkasink.Murmur2(c.in); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d (the Java client's)", c.in, got, c.want)
		}
	}
}

// The partition of a keyed message is the Java producer's for its key (an
// empty key is hashed too: Java hashes any non-null key), checked against
// franz-go's Java-compatible partitioner on random binary keys; a null key
// sticks to the source partition modulo the target's partitions;
// keep_partition keeps the source partition.
func TestPartitionAsTheJavaProducer(t *testing.T) {
	java := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		n := 1 + rng.IntN(50)
		if got, want := kafkasink.Partition(false, key, 7, n), int32(java.Partition(&kgo.Record{Key: key}, n)); got != want {
			t.Fatalf("case %d: key %x over %d partitions: %d, the Java producer's is %d", i, key, n, got, want)
		}
	}
	if got := kafkasink.Partition(false, nil, 7, 3); got != 1 {
		t.Errorf("null key from partition 7 over 3: %d, want 1", got)
	}
	if got := kafkasink.Partition(true, []byte("k"), 7, 3); got != 7 {
		t.Errorf("keep_partition: %d, want 7", got)
	}
}

// Both producers (at least once and exactly once) build a message the same
// way: by default the source key as is (null stays null, empty stays
// empty, binary kept), value, headers (repeats, order, null and binary
// values), timestamp, the provenance headers and the idempotency key in
// replay-key; a key template replaces the message key with its result;
// the partition is murmur2 of the message key as the Java producer's, a
// null key's its source partition modulo the target's, or with
// keep_partition the source partition.
func TestKafkaBothPathsKeepTheRecord(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 8)
	java := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, eos := range []bool{false, true} {
		for _, tc := range []struct {
			name, key string
			keep      bool
		}{{"source key", "", false}, {"key template", "id-{{ .Offset }}", false}, {"keep_partition", "", true}} {
			t.Run(fmt.Sprintf("%s eos=%v", tc.name, eos), func(t *testing.T) {
				topic := createTopic(t, addr, 5, nil)
				keyer, err := sinks.NewKeyer(tc.key)
				if err != nil {
					t.Fatal(err)
				}
				cfg := kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "keys", KeyTemplate: keyer.Templated(), KeepPartition: tc.keep,
					Log: zerolog.New(zerolog.NewTestWriter(t))}
				if eos {
					cfg.ExactlyOnce, cfg.TransactionalID, cfg.Group, cfg.SourceTopic = true, "both-"+topic, "replay.both-"+topic, "orders"
					cfg.CommitMetadata = func(int32) string { return `{"tool":"replay","plan":"keys","start":0,"end":1000}` }
				}
				s, err := kafkasink.New(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				want := map[string]record.Record{}
				for _, p := range []int32{0, 3, 4} {
					var batch []record.Record
					for o := int64(0); o < 10; o++ {
						r := rec(p, o, "", fmt.Sprintf("v%d/%d", p, o))
						r.Time = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(p)*time.Hour + time.Duration(o)*time.Millisecond)
						switch o % 4 {
						case 1:
							r.Key = []byte{}
						case 2:
							r.Key = []byte{0xff, 0x00, byte(o)}
						case 3:
							r.Key, r.Value = []byte(fmt.Sprintf("customer-%d", o)), nil
						}
						r.Headers = []record.Header{{Key: "dup", Value: []byte("1")}, {Key: "dup", Value: []byte{0x00, 0xff}}, {Key: "none"}}
						batch = append(batch, r)
						want[fmt.Sprintf("orders/%d/%d", p, o)] = r
					}
					mustWrite(t, sinktest.Keyed(s, keyer), batch...)
				}
				got := readIsolated(t, addr, topic, kgo.ReadCommitted())
				if len(got) != len(want) {
					t.Fatalf("%d messages, want %d", len(got), len(want))
				}
				for _, m := range got {
					own, prov := provenance(t, m)
					src, ok := want[prov[kafkasink.HeaderSourceTopic]+"/"+prov[kafkasink.HeaderSourcePartition]+"/"+prov[kafkasink.HeaderSourceOffset]]
					if !ok {
						t.Fatalf("message %d@%d: provenance %v names no record", m.Partition, m.Offset, prov)
					}
					wantKey, idem := src.Key, fmt.Sprintf("orders/%d/%d", src.Partition, src.Offset)
					if tc.key != "" {
						wantKey = []byte(fmt.Sprintf("id-%d", src.Offset))
						idem = string(wantKey)
					}
					if (m.Key == nil) != (wantKey == nil) || !bytes.Equal(m.Key, wantKey) {
						t.Errorf("message %d@%d: key %q (null %v), want %q (null %v)", m.Partition, m.Offset, m.Key, m.Key == nil, wantKey, wantKey == nil)
					}
					if (m.Value == nil) != (src.Value == nil) || !bytes.Equal(m.Value, src.Value) || !m.Timestamp.Equal(src.Time) || m.Attrs.TimestampType() != 0 {
						t.Errorf("message %d@%d: value %q at %v, want %q at %v (CreateTime)", m.Partition, m.Offset, m.Value, m.Timestamp, src.Value, src.Time)
					}
					if prov[kafkasink.HeaderKey] != idem {
						t.Errorf("message %d@%d: %s %q, want %q", m.Partition, m.Offset, kafkasink.HeaderKey, prov[kafkasink.HeaderKey], idem)
					}
					if len(own) != 3 || own[0].Key != "dup" || string(own[0].Value) != "1" || own[1].Key != "dup" || !bytes.Equal(own[1].Value, []byte{0, 0xff}) || own[2].Value != nil {
						t.Errorf("message %d@%d: headers %+v, want dup=1, dup=00ff, none=null", m.Partition, m.Offset, own)
					}
					wantPart := src.Partition % 5
					switch {
					case tc.keep:
						wantPart = src.Partition
					case wantKey != nil:
						wantPart = int32(java.Partition(&kgo.Record{Key: wantKey}, 5))
					}
					if m.Partition != wantPart {
						t.Errorf("record %d@%d (key %q): partition %d, want %d", src.Partition, src.Offset, wantKey, m.Partition, wantPart)
					}
				}
			})
		}
	}
}
