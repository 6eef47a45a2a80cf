package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
