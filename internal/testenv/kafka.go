package testenv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/runner/sandbox"
)

// Kafka is an in-process Kafka cluster (kfake) listening on the loopback
// interface, closed when the test that started it ends.
type Kafka struct {
	*kfake.Cluster
	// Addr is the first broker's address, host:port; Addrs are all of them.
	Addr  string
	Addrs []string
}

// KafkaOption configures NewKafka.
type KafkaOption func(*kafkaConfig)

type kafkaConfig struct {
	partitions int32
	topics     []string
	opts       []kfake.Opt
}

// Partitions sets the partition count of the Topics (default 1).
func Partitions(n int32) KafkaOption { return func(c *kafkaConfig) { c.partitions = n } }

// Topics creates topics at start, each with Partitions partitions.
func Topics(names ...string) KafkaOption {
	return func(c *kafkaConfig) { c.topics = append(c.topics, names...) }
}

// Kfake passes options to kfake.NewCluster (SASL, brokers, ports, configs,
// ControlKey hooks...). The default is one broker.
func Kfake(opts ...kfake.Opt) KafkaOption {
	return func(c *kafkaConfig) { c.opts = append(c.opts, opts...) }
}

// clusterSeq numbers the clusters NewKafka starts.
var clusterSeq atomic.Int64

// NewKafka starts a cluster for t and closes it in t.Cleanup.
func NewKafka(t testing.TB, opts ...KafkaOption) *Kafka {
	t.Helper()
	cfg := kafkaConfig{partitions: 1}
	for _, o := range opts {
		o(&cfg)
	}
	// A cluster id of its own (kfake's default is the same for all): a
	// sink tells the source cluster from another one by it.
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID(fmt.Sprintf("testenv-%d-%d", os.Getpid(), clusterSeq.Add(1)))} // later options win: Kfake(kfake.NumBrokers(3)) overrides
	if len(cfg.topics) > 0 {
		kopts = append(kopts, kfake.SeedTopics(cfg.partitions, cfg.topics...))
	}
	c, err := kfake.NewCluster(append(kopts, cfg.opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	return &Kafka{Cluster: c, Addr: addrs[0], Addrs: addrs}
}

// Client returns a franz-go client of the cluster, closed when t ends; opts
// come after the seed brokers (SASL, consume settings...).
func (k *Kafka) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addrs...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the cluster, closed when t ends.
func (k *Kafka) Admin(t testing.TB, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	return kadm.NewClient(k.Client(t, opts...))
}

// CreateTopic creates topic with partitions partitions and the given topic
// configs (nil: the defaults).
func (k *Kafka) CreateTopic(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	var cfg map[string]*string
	for key, v := range configs {
		if cfg == nil {
			cfg = map[string]*string{}
		}
		cfg[key] = kadm.StringPtr(v)
	}
	resp, err := k.Admin(t).CreateTopic(t.Context(), partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// Produce writes recs to topic with acks from all replicas, each to its
// own Partition (the field as set: 0 unless given), with its Key, Value,
// Headers and Timestamp (the zero Timestamp: now). A record's Topic, when
// empty, is topic.
func (k *Kafka) Produce(t testing.TB, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0))
	defer cl.Close()
	for _, r := range recs {
		if r.Topic == "" {
			r.Topic = topic
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// Seed produces the sandbox's order events described by s (key-hashed
// partitions, CreateTime timestamps increasing with the offset) and
// returns s.
func (k *Kafka) Seed(t testing.TB, s sandbox.Seed) sandbox.Seed {
	t.Helper()
	if err := sandbox.Produce(t.Context(), k.Addr, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// ReadTopic returns every record of topic, in offset order per partition,
// up to each partition's high watermark when it is called; opts configure
// the client (SASL...). It fails t when that takes more than 20 s.
func (k *Kafka) ReadTopic(t testing.TB, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ends, err := k.Admin(t, opts...).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	hwm, from := map[int32]int64{}, map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			hwm[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(hwm) == 0 {
		return nil
	}
	cl := k.Client(t, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))...)
	defer cl.Close()
	var out []*kgo.Record
	for len(hwm) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v (partitions still to read, with their ends: %v)", topic, err, hwm)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("read %s: %v", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := hwm[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				if r.Offset+1 >= end {
					delete(hwm, r.Partition)
				}
			}
		})
	}
	return out
}

// Committed returns the offsets group committed on topic, by partition
// (At and Metadata as committed); a partition without a commit, or a group
// that does not exist, is absent.
func (k *Kafka) Committed(t testing.TB, group, topic string) map[int32]kadm.Offset {
	t.Helper()
	resp, err := k.Admin(t).FetchOffsets(t.Context(), group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]kadm.Offset{}
	}
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	out := map[int32]kadm.Offset{}
	for p, o := range resp.Offsets()[topic] {
		out[p] = o
	}
	return out
}

// EncodeBatch encodes recs as one record batch of magic 2 (KIP-98) at
// offset base, uncompressed, with attributes attrs (e.g. 0x08, the
// LOG_APPEND_TIME timestamp type, which kgo's producer never sets) and
// the given MaxTimestamp; the first timestamp is recs[0]'s and each
// record's delta its own Timestamp's distance from it. The CRC is right.
func EncodeBatch(base int64, attrs int16, maxTimestamp time.Time, recs ...*kgo.Record) []byte {
	first := recs[0].Timestamp.UnixMilli()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp.UnixMilli() - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		raw = AppendRecord(raw, kr)
	}
	return SealBatch(kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTimestamp.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: raw})
}

// AppendRecord appends r, a record of a v2 batch, to raw with its Length
// set from the rest.
func AppendRecord(raw []byte, r kmsg.Record) []byte {
	r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows a one-byte zero length
	return r.AppendTo(raw)
}

// SealBatch returns the encoding of b, a v2 record batch, with its Length
// and its CRC (CRC-32C of everything after the CRC field, KIP-98) set from
// the rest, as a broker stores it.
func SealBatch(b kmsg.RecordBatch) []byte {
	b.Length = int32(len(b.AppendTo(nil)) - 12) // what follows FirstOffset and Length
	b.CRC = int32(crc32.Checksum(b.AppendTo(nil)[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

// ServeBatches makes the cluster answer every Fetch from now on with the
// given encoded record batches of topic's partition (in offset order, as
// EncodeBatch makes them), the way a broker serves its log: from the batch
// that holds the fetch offset, whole batches up to the request's size, at
// least one (KIP-74), with high watermark and last stable offset hwm. The
// cluster still answers every other request (metadata, ListOffsets,
// commits) from its own log, so produce the same offsets to it first.
//
// It is for layouts kfake cannot store: kfake stamps a LOG_APPEND_TIME
// batch with its append time but leaves the batch's CRC as produced, so
// every client rejects the batch it serves.
func (k *Kafka) ServeBatches(t testing.TB, topic string, partition int32, hwm int64, batches ...[]byte) {
	t.Helper()
	details, err := k.Admin(t).ListTopics(t.Context(), topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		t.Fatalf("topic %s: %v", topic, err)
	}
	id := details[topic].ID // Fetch v13 (Kafka 3.1, KIP-516) names topics by ID
	k.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset = rp.Partition, hwm, hwm
				sp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null record set
				switch {
				case rt.Topic != topic && rt.TopicID != id, rp.Partition != partition:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case rp.FetchOffset > hwm:
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				default:
					sp.RecordBatches = append(sp.RecordBatches, serveFrom(batches, rp.FetchOffset, int(min(rp.PartitionMaxBytes, req.MaxBytes)))...)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// serveFrom returns what a broker returns of batches for a fetch at
// offset: the batches from the one holding offset, whole, up to maxBytes,
// at least one.
func serveFrom(batches [][]byte, offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range batches {
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if last < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out
}
