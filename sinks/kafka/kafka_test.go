package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/pipeline"

	"github.com/replay-tool/replay/sinks/file"
	httpsink "github.com/replay-tool/replay/sinks/http"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	kafkaScram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// newKafkaCluster starts an in-process Kafka cluster (kfake speaks the real
// protocol over TCP), closed when t ends.
func newKafkaCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var topicSeq atomic.Int64

// createTopic creates a topic unique to the test with the given partitions
// and configs, and returns its name.
func createTopic(t *testing.T, addr string, partitions int, configs map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("target-%d", topicSeq.Add(1))
	var entries []kafka.ConfigEntry
	for k, v := range configs {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	resp, err := (&kafka.Client{Addr: kafka.TCP(addr)}).CreateTopics(t.Context(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: name, NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: entries}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Errors[name]; err != nil {
		t.Fatal(err)
	}
	return name
}

// readTopic returns every message of topic, in offset order per partition,
// reading each partition up to its high watermark; tr and opts carry
// SASL settings.
func readTopic(t *testing.T, addr, topic string, tr *kafka.Transport, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	if tr != nil {
		client.Transport = tr
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("metadata of %s: %v %+v", topic, err, md)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatal(err)
	}
	hwm := map[int32]int64{}
	consume := map[int32]kgo.Offset{}
	for _, po := range offs.Topics[topic] {
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		if po.LastOffset > 0 {
			hwm[int32(po.Partition)] = po.LastOffset
			consume[int32(po.Partition)] = kgo.NewOffset().AtStart()
		}
	}
	if len(hwm) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(hwm) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (still to read: %v)", topic, err, hwm)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("reading %s: %v", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset+1 >= hwm[r.Partition] {
				delete(hwm, r.Partition)
			}
		})
	}
	return out
}

// provenance splits a message's headers into the record's own and the
// provenance headers the sink appended, the idempotency key's last.
func provenance(t *testing.T, r *kgo.Record) (own []kgo.RecordHeader, prov map[string]string) {
	t.Helper()
	names := []string{kafkasink.HeaderSourceTopic, kafkasink.HeaderSourcePartition, kafkasink.HeaderSourceOffset, kafkasink.HeaderSourceTimestamp, kafkasink.HeaderPlan, kafkasink.HeaderKey}
	n := len(r.Headers) - len(names)
	if n < 0 {
		t.Fatalf("message %d@%d has %d headers, fewer than the provenance headers", r.Partition, r.Offset, len(r.Headers))
	}
	prov = map[string]string{}
	for i, name := range names {
		if h := r.Headers[n+i]; h.Key != name {
			t.Fatalf("message %d@%d: header %d is %q, want %q", r.Partition, r.Offset, n+i, h.Key, name)
		}
		prov[name] = string(r.Headers[n+i].Value)
	}
	return r.Headers[:n], prov
}

// storedFromMessage is the record a message carries, as the suite compares
// it: coordinates from the provenance headers, the timestamp of the
// message itself, and the record's own headers.
func storedFromMessage(t *testing.T, r *kgo.Record) sinktest.Stored {
	t.Helper()
	own, prov := provenance(t, r)
	part, err1 := strconv.ParseInt(prov[kafkasink.HeaderSourcePartition], 10, 32)
	off, err2 := strconv.ParseInt(prov[kafkasink.HeaderSourceOffset], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("provenance of %d@%d: %v", r.Partition, r.Offset, err)
	}
	s := sinktest.Stored{Topic: prov[kafkasink.HeaderSourceTopic], Partition: int32(part), Offset: off, Timestamp: r.Timestamp}
	s.Value = sinktest.Expect(record.Record{Value: r.Value}).Value
	hs := make([]record.Header, len(own))
	for i, h := range own {
		hs[i] = record.Header{Key: h.Key, Value: h.Value}
	}
	s.Headers = sinktest.Expect(record.Record{Headers: hs}).Headers
	return s
}

// kafkaHarness runs the conformance suite on the kafka sink: a target is a
// topic. Contents is the latest message of each idempotency key (the
// replay-key header), which is what a consumer deduplicating by it sees
// (and, with a key template, what a compacted topic converges to).
type kafkaHarness struct {
	addr       string
	partitions int
	keep       bool
	topics     sinktest.Targets[string]
}

func (h *kafkaHarness) topic(t *testing.T) string {
	// Room for the Contents corpus's 1 MiB value.
	return h.topics.Get(t, func() string {
		return createTopic(t, h.addr, h.partitions, map[string]string{"max.message.bytes": "8388608"})
	})
}

func (h *kafkaHarness) New(t *testing.T) sinks.Sink { return h.NewKeyed(t, nil) }

func (h *kafkaHarness) NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink {
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{h.addr}, Topic: h.topic(t), KeepPartition: h.keep,
		KeyTemplate: keyer.Templated(), PlanName: "conformance", Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *kafkaHarness) Contents(t *testing.T) []string {
	latest := map[string]string{}
	for _, r := range readTopic(t, h.addr, h.topic(t), nil) {
		s := storedFromMessage(t, r)
		if h.keep && r.Partition != s.Partition {
			t.Errorf("record of source partition %d produced to partition %d with keep_partition", s.Partition, r.Partition)
		}
		_, prov := provenance(t, r)
		latest[prov[kafkasink.HeaderKey]] = s.String()
	}
	out := make([]string, 0, len(latest))
	for _, s := range latest {
		out = append(out, s)
	}
	return out
}

// Records is the Contents group's read-back: each message as the record
// it carries (coordinates from the provenance headers), key, value and
// the record's own headers as produced.
func (h *kafkaHarness) Records(t *testing.T) []record.Record {
	var out []record.Record
	for _, m := range readTopic(t, h.addr, h.topic(t), nil) {
		st := storedFromMessage(t, m)
		own, _ := provenance(t, m)
		r := record.Record{Topic: st.Topic, Partition: st.Partition, Offset: st.Offset, Time: m.Timestamp, Key: m.Key, Value: m.Value}
		for _, h := range own {
			r.Headers = append(r.Headers, record.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, r)
	}
	return out
}

func TestKafkaConformance(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	t.Run("hash", func(t *testing.T) {
		sinktest.RunWith(t, &kafkaHarness{addr: addr, partitions: 3}, sinktest.Features{Durable: sinktest.OnWrite, Contents: true})
	})
	t.Run("keep_partition", func(t *testing.T) {
		sinktest.RunWith(t, &kafkaHarness{addr: addr, partitions: 8, keep: true}, sinktest.Features{Durable: sinktest.OnWrite, Contents: true})
	})
}

func newKafka(t *testing.T, cfg kafkasink.Config) *kafkasink.Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := kafkasink.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// What a message carries: the idempotency key as its key, the record's
// value (a tombstone stays one), its timestamp as CreateTime, its headers
// (null values too) and then the provenance headers.
func TestKafkaMessageForm(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	keyer, err := sinks.NewKeyer("order-{{ .Value.id }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedKafka(t, keyer, kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders-fix"})
	ts := time.Date(2024, 2, 29, 23, 59, 59, 987_000_000, time.UTC) // old: the source's time, not the clock's
	r := record.Record{Topic: "orders", Partition: 7, Offset: 123456, Time: ts, Key: []byte("k"), Value: []byte(`{"id":42}`),
		Headers: []record.Header{{Key: "trace", Value: []byte("abc")}, {Key: "none"}, {Key: "empty", Value: []byte{}}}}
	tomb := record.Record{Topic: "orders", Partition: 7, Offset: 123457, Time: ts, Value: nil}
	tombKeyer, _ := sinks.NewKeyer("{{ .Topic }}-{{ .Offset }}")
	mustWrite(t, s, r)
	mustWrite(t, newKeyedKafka(t, tombKeyer, kafkasink.Config{Brokers: []string{addr}, Topic: topic}), tomb)
	msgs := readTopic(t, addr, topic, nil)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	m := msgs[0]
	if string(m.Key) != "order-42" || string(m.Value) != `{"id":42}` || !m.Timestamp.Equal(ts) || m.Attrs.TimestampType() != 0 {
		t.Errorf("message key %q value %q time %v (type %d), want order-42, the value, %v as CreateTime", m.Key, m.Value, m.Timestamp, m.Attrs.TimestampType(), ts)
	}
	own, prov := provenance(t, m)
	if len(own) != 3 || own[0].Key != "trace" || string(own[0].Value) != "abc" || own[1].Value != nil || own[2].Value == nil {
		t.Errorf("record headers = %+v, want trace=abc, none=null, empty=\"\"", own)
	}
	want := map[string]string{kafkasink.HeaderSourceTopic: "orders", kafkasink.HeaderSourcePartition: "7", kafkasink.HeaderSourceOffset: "123456",
		kafkasink.HeaderSourceTimestamp: "2024-02-29T23:59:59.987Z", kafkasink.HeaderPlan: "orders-fix"}
	for k, v := range want {
		if prov[k] != v {
			t.Errorf("header %s = %q, want %q", k, prov[k], v)
		}
	}
	if m := msgs[1]; m.Value != nil || string(m.Key) != "orders-123457" {
		t.Errorf("tombstone produced as key %q value %q, want a null value", m.Key, m.Value)
	}
}

// A compacted target converges to one message per key however often the
// window is replayed: the idempotency a Kafka target offers. The key here
// is the default idempotency key, made the message key by a key template
// (without one, the message keeps the source key, and the target converges
// to the latest record of each source key, as the source does). (Compaction
// never touches the active segment, kfake's last batch of each partition,
// so a few duplicates remain there, as in Kafka.)
func TestKafkaCompactedTopicConverges(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	topic := createTopic(t, addr, 3, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1",
		"delete.retention.ms": "315360000000"}) // keep the tombstones, so that all keys are compared
	window := sinktest.Window(50, 2)
	coords, err := sinks.NewKeyer("{{ .Topic }}/{{ .Partition }}/{{ .Offset }}")
	if err != nil {
		t.Fatal(err)
	}
	for run := range 3 { // a clean run and two re-runs
		writeAll(t, newKeyedKafka(t, coords, kafkasink.Config{Brokers: []string{addr}, Topic: topic}), window, uint64(run), 9)
	}
	want := sinktest.Want(window)
	if got := len(readTopic(t, addr, topic, nil)); got != 3*len(want) {
		t.Fatalf("%d messages before compaction, want %d (3 runs)", got, 3*len(want))
	}
	c.Compact()
	msgs := readTopic(t, addr, topic, nil)
	latest := map[string]string{}
	for _, r := range msgs {
		latest[string(r.Key)] = storedFromMessage(t, r).String()
	}
	var got []string
	for _, s := range latest {
		got = append(got, s)
	}
	sinktest.Equal(t, "latest message per key after compaction", got, want)
	if len(msgs) > len(want)+3*9 {
		t.Errorf("%d messages after compaction, want at most %d (one per key, plus the active segments)", len(msgs), len(want)+3*9)
	}
}

// Messages of one key land in one partition, the one a Java producer's
// default partitioner picks (murmur2), in offset order.
func TestKafkaHashPartitioning(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 6, nil)
	keyer, _ := sinks.NewKeyer("{{ .Key }}")
	s := newKeyedKafka(t, keyer, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
	var batch []record.Record
	for i := range 60 {
		batch = append(batch, rec(int32(i%2), int64(i), fmt.Sprintf("k-%d", i%10), fmt.Sprintf(`{"i":%d}`, i)))
	}
	mustWrite(t, s, batch[:30]...)
	mustWrite(t, s, batch[30:]...)
	where := map[string]int32{}
	last := map[string]int64{}
	murmur := kafka.Murmur2Balancer{Consistent: true}
	for _, r := range readTopic(t, addr, topic, nil) {
		k := string(r.Key)
		if p, seen := where[k]; seen && p != r.Partition {
			t.Errorf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		where[k] = r.Partition
		if want := murmur.Balance(kafka.Message{Key: r.Key}, 0, 1, 2, 3, 4, 5); int(r.Partition) != want {
			t.Errorf("key %s in partition %d, murmur2 says %d", k, r.Partition, want)
		}
		_, prov := provenance(t, r)
		off, _ := strconv.ParseInt(prov[kafkasink.HeaderSourceOffset], 10, 64)
		if off <= last[k] && last[k] != 0 {
			t.Errorf("key %s: offset %d after %d", k, off, last[k])
		}
		last[k] = off
	}
	if len(where) != 10 {
		t.Errorf("%d keys, want 10", len(where))
	}
}

func TestKafkaKeepPartitionNeedsThePartition(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 2, nil)
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic, KeepPartition: true})
	mustWrite(t, s, rec(1, 1, "", "{}"))
	err := s.Write(t.Context(), []record.Record{rec(2, 1, "", "{}")})
	if err == nil || !strings.Contains(err.Error(), "keep_partition") || !strings.Contains(err.Error(), "source partition 2") {
		t.Fatalf("Write to a missing partition = %v, want an error naming keep_partition and the partition", err)
	}
	if n := len(readTopic(t, addr, topic, nil)); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

func TestKafkaRecordErrors(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	keyer, _ := sinks.NewKeyer("{{ .Value.id }}")
	s := newKeyedKafka(t, keyer, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
	var re *record.Error
	err := s.Write(t.Context(), []record.Record{rec(3, 10, "", `{"id":1}`), rec(3, 11, "", "not json"), rec(3, 12, "", `{"id":3}`)})
	if !errors.As(err, &re) || re.Offset != 11 || re.Partition != 3 {
		t.Errorf("key template failure: Write = %v, want a *record.Error for orders/3@11", err)
	}
	huge := rec(3, 21, "", fmt.Sprintf(`{"id":2,"blob":%q}`, strings.Repeat("x", 2<<20)))
	err = s.Write(t.Context(), []record.Record{rec(3, 20, "", `{"id":1}`), huge, rec(3, 22, "", `{"id":3}`)})
	if !errors.As(err, &re) || re.Offset != 21 || !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("record too large: Write = %v, want a *record.Error for orders/3@21", err)
	}
	if n := len(readTopic(t, addr, topic, nil)); n != 0 {
		t.Errorf("%d messages produced, want none", n)
	}
}

func TestKafkaConfigErrors(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	for _, tc := range []struct {
		name string
		cfg  kafkasink.Config
		want string
	}{
		{"missing topic", kafkasink.Config{Brokers: []string{addr}, Topic: "no-such-topic"}, "topic no-such-topic on " + addr + ": the topic does not exist: create it first"},
		{"unreachable cluster", kafkasink.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, "kafka sink: connect to 127.0.0.1:1: the broker is not reachable"},
		{"no brokers", kafkasink.Config{Topic: "t"}, "brokers and topic are required"},
		{"bad SASL mechanism", kafkasink.Config{Brokers: []string{addr}, Topic: "t", SASL: plan.SASL{Mechanism: "GSSAPI"}}, `sasl mechanism "GSSAPI"`},
		{"missing CA file", kafkasink.Config{Brokers: []string{addr}, Topic: "t", TLS: plan.TLS{Enabled: true, CAFile: "/nonexistent/ca.pem"}}, "tls ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			s, err := kafkasink.New(ctx, tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("NewKafka succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// The target cluster has its own SASL settings: a right password
// produces, a wrong one fails at start with an error that says so (and
// never shows the password).
func TestKafkaSASL(t *testing.T) {
	c := newKafkaCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "replay", "s3cret-pw"))
	addr := c.ListenAddrs()[0]
	adminMech := kgo.SASL(scramAuth("replay", "s3cret-pw"))
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), adminMech)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	topicReq := kmsg.NewCreateTopicsRequestTopic()
	topicReq.Topic, topicReq.NumPartitions, topicReq.ReplicationFactor = "secure", 1, 1
	req.Topics = append(req.Topics, topicReq)
	if _, err := req.RequestWith(t.Context(), admin); err != nil {
		t.Fatal(err)
	}
	good := plan.SASL{Mechanism: "SCRAM-SHA-512", Username: "replay", Password: "s3cret-pw"}
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: "secure", SASL: good})
	mustWrite(t, s, rec(0, 1, "", `{"ok":true}`))
	mech, err := kafkaScram.Mechanism(kafkaScram.SHA512, "replay", "s3cret-pw")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(readTopic(t, addr, "secure", &kafka.Transport{SASL: mech}, adminMech)); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
	bad := good
	bad.Password = "wrong-pw-123"
	_, err = kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: "secure", SASL: bad})
	if err == nil || !strings.Contains(err.Error(), `SASL authentication failed for user "replay"`) || strings.Contains(err.Error(), bad.Password) {
		t.Errorf("wrong password: NewKafka = %v, want an authentication error without the password", err)
	}
}

// A broker failing every produce with a retriable error (too few in-sync
// replicas) makes Write fail with a transient error once kafka-go's own
// retries are spent, and the messages were not acknowledged.
func TestKafkaNotEnoughReplicasIsTransient(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic, MaxAttempts: 3})
	var failing atomic.Bool
	failing.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !failing.Load() {
			return nil, nil, false
		}
		return produceRefused(kr, kerr.NotEnoughReplicas.Code), nil, true
	})
	start := time.Now()
	err := s.Write(t.Context(), []record.Record{rec(0, 1, "", "{}")})
	failing.Store(false)
	t.Logf("Write failed after %v", time.Since(start))
	if err == nil || !sinks.Transient(err) || !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("Write = %v, want a transient NOT_ENOUGH_REPLICAS error", err)
	}
	if n := len(readTopic(t, addr, topic, nil)); n != 0 {
		t.Errorf("%d messages stored, want none", n)
	}
	mustWrite(t, s, rec(0, 1, "", "{}")) // the runner's retry, once the replicas are back
}

// A target topic the principal may not write to fails the Write at once,
// not transient, naming the ACL to grant.
func TestKafkaTopicAuthorizationFailureNamesTheACL(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceRefused(kr, kerr.TopicAuthorizationFailed.Code), nil, true
	})
	err := s.Write(t.Context(), []record.Record{rec(0, 1, "", "{}")})
	if err == nil || sinks.Transient(err) || !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "grant it Write on topic "+topic) {
		t.Fatalf("Write = %v, want a TOPIC_AUTHORIZATION_FAILED error naming the ACL to grant", err)
	}
}

// A target topic whose config the sink cannot read is warned of (its
// batches then assume 1 MiB): naming the ACL to grant (DescribeConfigs)
// when the principal may not read it, and no ACL for another failure.
func TestKafkaUnreadableTopicConfigIsWarnedOf(t *testing.T) {
	for _, tc := range []struct {
		code     int16
		namesACL bool
	}{{kerr.TopicAuthorizationFailed.Code, true}, {kerr.KafkaStorageError.Code, false}} {
		c := newKafkaCluster(t)
		addr := c.ListenAddrs()[0]
		topic := createTopic(t, addr, 1, nil)
		c.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			req := kr.(*kmsg.DescribeConfigsRequest)
			resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
			for _, r := range req.Resources {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, tc.code
				resp.Resources = append(resp.Resources, rr)
			}
			return resp, nil, true
		})
		var logs bytes.Buffer
		s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, Log: zerolog.New(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if !strings.Contains(logs.String(), `"level":"warn"`) || strings.Contains(logs.String(), "grant DescribeConfigs on it") != tc.namesACL {
			t.Errorf("error code %d: logs %s, want a warning that names DescribeConfigs: %v", tc.code, logs.String(), tc.namesACL)
		}
	}
}

// A Write cancelled while the producer (franz-go) still holds its records
// must not leave it reading the caller's buffers: the runner reuses them.
// Each of the cancelled Writes is cancelled while the broker holds its
// produce request.
func TestKafkaCancelledWriteKeepsNoBuffers(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
	mustWrite(t, s, rec(0, 0, "", `{"v":0}`)) // metadata and connections ready: the next Write reaches the producer
	var hold atomic.Bool
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if hold.Load() {
			arrived <- struct{}{}
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	for i := range 3 {
		value := []byte(`{"v":"original"}`)
		r := rec(0, int64(2*i+1), "", "")
		r.Value = value
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		hold.Store(true)
		go func() { done <- s.Write(ctx, []record.Record{r}) }()
		<-arrived // the producer holds the record: its request is in flight
		hold.Store(false)
		cancel()
		release <- struct{}{}
		<-done
		copy(value, `{"v":"CLOBBERED"}`) // as the runner's next fetch would
		mustWrite(t, s, rec(0, int64(2*i+2), "", fmt.Sprintf(`{"v":%d}`, 2*i+2)))
	}
	stored := 0
	for _, m := range readTopic(t, addr, topic, nil) {
		if strings.Contains(string(m.Value), "CLOBBERED") {
			t.Fatalf("message %d carries bytes changed after Write returned: %s", m.Offset, m.Value)
		}
		if string(m.Value) == `{"v":2}` || string(m.Value) == `{"v":4}` || string(m.Value) == `{"v":6}` {
			stored++
		}
	}
	if stored != 3 {
		t.Fatalf("%d of the 3 messages written after the cancelled ones are in the topic", stored)
	}
}

func scramAuth(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// A target address that answers in another protocol (an HTTP port) is
// refused at once with what it answered, before kafka-go reads the answer
// as a response size and array lengths (which allocated gigabytes).
func TestKafkaTargetNotKafka(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512))
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	_, err = kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{l.Addr().String()}, Topic: "orders-fixed"})
	want := l.Addr().String() + ` is not a Kafka broker: it answered "HTTP/1.1"`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sink.brokers") {
		t.Fatalf("want %q and a hint at sink.brokers, got %v", want, err)
	}
}

// Found by a break-it pass: dead letters produced to Kafka carried the
// idempotency key (orders/0/3) instead of the record's own key, so
// replaying the dead-letter topic re-keyed every record. A kafka
// dead-letter sink keeps each record's key, a null key included, and adds
// the reason header; with key: set, the template applies.
func TestKafkaDeadLettersKeepTheirKey(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	for _, tc := range []struct {
		name, key string
		want      []string // message keys; "<nil>" for a null key
	}{
		{"own keys", "", []string{"k3", "<nil>"}},
		{"key template", "dl-{{ .Offset }}", []string{"dl-3", "dl-4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := createTopic(t, addr, 1, nil)
			cfg := plan.Sink{Type: "kafka", Key: tc.key, Config: &kafkasink.Section{Brokers: []string{addr}, Topic: topic}}
			s, err := registry.NewDeadLetter(t.Context(), cfg, sinks.Options{PlanName: "p"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			recs := []record.Record{
				sinks.DeadLetter(record.Record{Topic: "orders", Partition: 0, Offset: 3, Time: time.Now(), Key: []byte("k3"), Value: []byte("x")}, "not JSON"),
				sinks.DeadLetter(record.Record{Topic: "orders", Partition: 0, Offset: 4, Time: time.Now(), Value: []byte("y")}, "not JSON"),
			}
			key, err := pipeline.NewKey(cfg, s.Capabilities().Keys) // the runner's key stage of the dead-letter sink
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				if err := key.Apply(&recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Write(t.Context(), recs); err != nil {
				t.Fatal(err)
			}
			msgs := readTopic(t, addr, topic, nil)
			if len(msgs) != 2 {
				t.Fatalf("%d messages, want 2", len(msgs))
			}
			for i, m := range msgs {
				got := string(m.Key)
				if m.Key == nil {
					got = "<nil>"
				}
				if got != tc.want[i] {
					t.Errorf("message %d: key %s, want %s", i, got, tc.want[i])
				}
				own, _ := provenance(t, m)
				if len(own) == 0 || own[len(own)-1].Key != sinks.HeaderError || string(own[len(own)-1].Value) != "not JSON" {
					t.Errorf("message %d: headers %+v, want the reason last", i, own)
				}
			}
		})
	}
}

// Found by a break-it pass: on a topic with a small max.message.bytes,
// every batch was refused whole (MESSAGE_TOO_LARGE for all 500 messages),
// so no record could be pinned and on_error: skip did not help. Batches now
// stay under the topic's limit: records that fit are produced, and a
// record too large by itself is the *record.Error.
func TestKafkaTopicMaxMessageBytes(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 1, map[string]string{"max.message.bytes": "2000"})
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
	var batch []record.Record
	for i := range 40 { // ~300 B each: 12 KB in all, six times the limit
		batch = append(batch, rec(0, int64(i), "", fmt.Sprintf(`{"id":%d,"pad":%q}`, i, strings.Repeat("p", 250))))
	}
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatalf("records that each fit the topic's limit: %v", err)
	}
	if n := len(readTopic(t, addr, topic, nil)); n != 40 {
		t.Fatalf("%d messages produced, want 40", n)
	}
	big := rec(0, 41, "", fmt.Sprintf(`{"id":41,"pad":%q}`, strings.Repeat("p", 3000)))
	var re *record.Error
	err := s.Write(t.Context(), []record.Record{rec(0, 40, "", `{"id":40}`), big})
	if !errors.As(err, &re) || re.Offset != 41 || !strings.Contains(err.Error(), "max.message.bytes, 2000") {
		t.Errorf("a record over the topic's limit: Write = %v, want a *record.Error for offset 41 naming the limit", err)
	}
}

// Found in review: the dead-letter wrapper of header-carrying sinks always
// looked like a sink with local staging (so run --join refused a kafka,
// postgres or http dead-letter sink) and hid the http sink's own retries
// (so the runner retried it again). It has the wrapped sink's optional
// interfaces, and only those.
func TestDeadLetterWrapperInterfaces(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	dir := t.TempDir()
	for _, tc := range []struct {
		name                              string
		cfg                               plan.Sink
		resumer, syncer, positioner, self bool
	}{
		{"kafka", plan.Sink{Type: "kafka", Config: &kafkasink.Section{Brokers: []string{addr}, Topic: topic}}, false, false, false, false},
		{"http", plan.Sink{Type: "http", BatchSize: 10, Config: &httpsink.Section{URL: "http://127.0.0.1:1/dead"}}, false, false, false, true},
		{"csv file", plan.Sink{Type: "file", Config: &file.Section{Path: filepath.Join(dir, "dead.csv"), Format: "csv", Columns: plan.Columns{{Name: "offset", Field: "offset"}}}}, true, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := registry.NewDeadLetter(t.Context(), tc.cfg, sinks.Options{RunID: "r"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := s.Capabilities()
			resumer, syncer, positioner, self := c.Resumer != nil, c.Syncer != nil, c.Positioner != nil, c.RetriesItself
			if resumer != tc.resumer || syncer != tc.syncer || positioner != tc.positioner || self != tc.self {
				t.Errorf("%T: Resumer %v Syncer %v Positioner %v SelfRetrying %v; want %v %v %v %v",
					s, resumer, syncer, positioner, self, tc.resumer, tc.syncer, tc.positioner, tc.self)
			}
		})
	}
}

// keyedKafka is a kafka sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedKafka struct {
	*kafkasink.Sink
	keyer *sinks.Keyer
}

func (k keyedKafka) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedKafka(t *testing.T, keyer *sinks.Keyer, cfg kafkasink.Config) keyedKafka {
	t.Helper()
	cfg.KeyTemplate = keyer.Templated()
	return keyedKafka{newKafka(t, cfg), keyer}
}

// A record whose timestamp the target topic's broker refuses
// (INVALID_TIMESTAMP: beyond message.timestamp.after.max.ms or
// before.max.ms of the broker's clock, a CreateTime topic) is the
// *record.Error, found before anything of the batch is produced, in both
// the at-least-once and the exactly-once sink; a LogAppendTime topic
// stamps messages itself and takes it.
func TestKafkaTopicTimestampLimits(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	limits := map[string]string{"message.timestamp.after.max.ms": "3600000", "message.timestamp.before.max.ms": "86400000"}
	at := func(offset int64, ts time.Time) record.Record {
		r := rec(0, offset, "", `{"id":1}`)
		r.Time = ts
		return r
	}
	now := time.Now()
	for _, eos := range []bool{false, true} {
		topic := createTopic(t, addr, 1, limits)
		var s *kafkasink.Sink
		if eos {
			var err error
			if s, err = eosSink(t, addr, topic, "replay-ts"); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
		} else {
			s = newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic})
		}
		for _, tc := range []struct {
			ts   time.Time
			want string
		}{{now.Add(2 * time.Hour), "message.timestamp.after.max.ms (1h0m0s)"}, {now.Add(-48 * time.Hour), "message.timestamp.before.max.ms (24h0m0s)"}} {
			var re *record.Error
			err := s.Write(t.Context(), []record.Record{at(0, now), at(1, tc.ts)})
			if !errors.As(err, &re) || re.Offset != 1 || !errors.Is(err, kerr.InvalidTimestamp) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exactly once %v: Write = %v, want a *record.Error for offset 1 naming %s", eos, err, tc.want)
			}
		}
		if n := len(readTopic(t, addr, topic, nil)); n != 0 {
			t.Errorf("exactly once %v: %d messages produced of the refused batches, want 0", eos, n)
		}
	}
	appendTime := createTopic(t, addr, 1, map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "3600000"})
	s := newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: appendTime})
	if err := s.Write(t.Context(), []record.Record{at(0, now.Add(2*time.Hour))}); err != nil {
		t.Errorf("LogAppendTime topic: %v", err)
	}
}
