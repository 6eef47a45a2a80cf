package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/runner/sandbox"
)

// KafkaBrokersEnv names the environment variable that points the tests at
// a real Kafka cluster: a comma-separated list of host:port, as
// scripts/test-kafka prints it. Unset, every test starts its own kfake
// cluster in-process.
const KafkaBrokersEnv = "REPLAY_TEST_KAFKA_BROKERS"

// RealBrokers returns the brokers of the real cluster the tests run
// against, or nil when KafkaBrokersEnv is unset (kfake).
func RealBrokers() []string {
	var out []string
	for b := range strings.SplitSeq(os.Getenv(KafkaBrokersEnv), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Kafka is the cluster a test runs against: an in-process kfake cluster
// listening on the loopback interface, closed when the test that started
// it ends, or, with KafkaBrokersEnv set, the real cluster it names, which
// the test has to itself until it ends (see NewKafka).
type Kafka struct {
	// Cluster is the kfake cluster; nil on a real cluster. Its hooks
	// (ControlKey, SleepControl...) exist only there: a test that uses them
	// calls RequireKfake first.
	*kfake.Cluster
	// Addr is the first broker's address, host:port; Addrs are all of them.
	Addr  string
	Addrs []string
}

// Real reports whether k is a real Kafka cluster rather than kfake.
func (k *Kafka) Real() bool { return k.Cluster == nil }

// RequireKfake skips t when the tests run against a real cluster
// (KafkaBrokersEnv), saying why (why: what of kfake's the test needs, e.g.
// "ControlKey holds an EndTxn"). Called first, before the test sets up
// anything.
func RequireKfake(t testing.TB, why string) {
	t.Helper()
	if RealBrokers() != nil {
		t.Skipf("kfake only: %s", why)
	}
}

// KafkaOption configures NewKafka.
type KafkaOption func(*kafkaConfig)

type kafkaConfig struct {
	partitions int32
	topics     []string
	opts       []kfake.Opt
	kfakeOnly  string
}

// Partitions sets the partition count of the Topics (default 1).
func Partitions(n int32) KafkaOption { return func(c *kafkaConfig) { c.partitions = n } }

// Topics creates topics at start, each with Partitions partitions.
func Topics(names ...string) KafkaOption {
	return func(c *kafkaConfig) { c.topics = append(c.topics, names...) }
}

// Kfake passes options to kfake.NewCluster (SASL, brokers, ports, configs,
// ControlKey hooks...). The default is one broker. A test that passes any
// runs on kfake only: on a real cluster it is skipped.
func Kfake(opts ...kfake.Opt) KafkaOption {
	return func(c *kafkaConfig) {
		c.opts = append(c.opts, opts...)
		if c.kfakeOnly == "" {
			c.kfakeOnly = "it configures kfake itself (SASL, several brokers...)"
		}
	}
}

// clusterSeq numbers the clusters NewKafka starts.
var clusterSeq atomic.Int64

// NewKafka returns the cluster t runs against: a kfake cluster of its own,
// closed in t.Cleanup, or with KafkaBrokersEnv set the real cluster, which
// t then has to itself until it ends. On the real cluster NewKafka first
// waits for the test that holds it (tests marked Parallel take turns),
// then deletes every topic and consumer group left by earlier tests, so
// that each test starts, as on kfake, from an empty cluster; a second call
// within the same test (or one of its subtests) keeps what is there. The
// Topics are created with Partitions partitions.
func NewKafka(t testing.TB, opts ...KafkaOption) *Kafka {
	t.Helper()
	cfg := kafkaConfig{partitions: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if brokers := RealBrokers(); brokers != nil {
		if cfg.kfakeOnly != "" {
			t.Skipf("kfake only: %s", cfg.kfakeOnly)
		}
		k := &Kafka{Addr: brokers[0], Addrs: brokers}
		if claimReal(t) {
			k.reset(t)
		}
		for _, topic := range cfg.topics {
			k.CreateTopic(t, topic, cfg.partitions, nil)
		}
		return k
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

// The real cluster is one test's at a time: realHolder is the name of the
// test that has it ("" when none), realFree is signalled when it ends.
var (
	realMu     sync.Mutex
	realFree   = sync.NewCond(&realMu)
	realHolder string
)

// claimReal waits until the real cluster is free or already t's (t is the
// holder or a subtest of it) and reports whether t just claimed it, in
// which case it is released when t ends.
func claimReal(t testing.TB) bool {
	realMu.Lock()
	defer realMu.Unlock()
	name := t.Name()
	for realHolder != "" {
		if name == realHolder || strings.HasPrefix(name, realHolder+"/") {
			return false
		}
		realFree.Wait()
	}
	realHolder = name
	t.Cleanup(func() {
		realMu.Lock()
		realHolder = ""
		realMu.Unlock()
		realFree.Broadcast()
	})
	return true
}

// reset deletes every topic but Kafka's internal ones, and every consumer
// group, and waits until the cluster no longer lists them.
func (k *Kafka) reset(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// kadm answers ListTopics from the client's metadata cache, up to
	// MetadataMinAge old (5 s by default): the deleted topics would be
	// listed for that long.
	adm := k.Admin(t, kgo.MetadataMinAge(50*time.Millisecond))
	// A member of an earlier test's group (a killed process's, until its
	// session times out; a consumer still leaving) keeps the group
	// NON_EMPTY_GROUP: wait for it to go.
	for {
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("reset the real cluster: list groups: %v", err)
		}
		names := groups.Groups()
		if len(names) == 0 {
			break
		}
		resp, err := adm.DeleteGroups(ctx, names...)
		if err != nil {
			t.Fatalf("reset the real cluster: delete groups: %v", err)
		}
		var busy []string
		for g, r := range resp {
			switch {
			case r.Err == nil, errors.Is(r.Err, kerr.GroupIDNotFound):
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				busy = append(busy, g)
			default:
				t.Fatalf("reset the real cluster: delete group %s: %v", g, r.Err)
			}
		}
		if len(busy) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reset the real cluster: groups %v still have members after 90 s (a process of an earlier test, or another client of the cluster?)", busy)
		case <-time.After(500 * time.Millisecond):
		}
	}
	for {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("reset the real cluster: list topics: %v", err)
		}
		names := topics.Names()
		if len(names) == 0 {
			return
		}
		if _, err := adm.DeleteTopics(ctx, names...); err != nil {
			t.Fatalf("reset the real cluster: delete topics %v: %v", names, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reset the real cluster: topics %v still listed after 60 s", names)
		case <-time.After(100 * time.Millisecond):
		}
	}
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
// configs (nil: the defaults). On a real cluster it retries while a topic
// of the same name deleted by the reset is still being removed, and the
// replication factor is the cluster's default.
func (k *Kafka) CreateTopic(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for key, v := range configs {
		cfg[key] = kadm.StringPtr(v)
	}
	rf := int16(1)
	if k.Real() {
		rf = -1
	}
	adm := k.Admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := adm.CreateTopic(t.Context(), partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if k.Real() && errors.Is(err, kerr.TopicAlreadyExists) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if k.Real() {
		k.waitLeaders(t, topic, partitions)
	}
}

// waitLeaders waits until every partition of topic has a leader in the
// cluster's metadata: a real cluster creates a topic's partitions after
// it answered CreateTopics.
func (k *Kafka) waitLeaders(t testing.TB, topic string, partitions int32) {
	t.Helper()
	adm := k.Admin(t, kgo.MetadataMinAge(50*time.Millisecond)) // see reset
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(t.Context(), topic)
		if err == nil {
			td := md.Topics[topic]
			ready := td.Err == nil && int32(len(td.Partitions)) == partitions
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: its %d partitions have no leader after 30 s (%v)", topic, partitions, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DeleteRecords moves the log start offset of topic's partition to offset
// (DeleteRecords, KIP-107), as retention would.
func (k *Kafka) DeleteRecords(topic string, partition int32, offset int64) error {
	if !k.Real() {
		return k.Cluster.DeleteRecords(topic, partition, offset)
	}
	return k.admin(func(ctx context.Context, adm *kadm.Client) error {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: partition, At: offset})
		resp, err := adm.DeleteRecords(ctx, offs)
		if err != nil {
			return err
		}
		return resp.Error()
	})
}

// DeleteTopic deletes topic.
func (k *Kafka) DeleteTopic(topic string) error {
	if !k.Real() {
		return k.Cluster.DeleteTopic(topic)
	}
	return k.admin(func(ctx context.Context, adm *kadm.Client) error {
		resp, err := adm.DeleteTopic(ctx, topic)
		if err == nil {
			err = resp.Err
		}
		return err
	})
}

// admin calls fn with an admin client of the cluster and a 30 s context,
// for the calls that take no t.
func (k *Kafka) admin(fn func(context.Context, *kadm.Client) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl))
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
	// A bound so that a broker that stops answering fails the test; a
	// loaded machine producing to a thousand new partitions takes seconds.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
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
// the client (SASL, isolation level, KeepControlRecords for the
// transaction markers too). It fails t when that takes more than 20 s.
func (k *Kafka) ReadTopic(t testing.TB, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// The control records (transaction markers) are read too, to reach
	// a partition whose last offset is a marker, and returned only when
	// opts ask for them (kgo.KeepControlRecords).
	probe := k.Client(t, opts...)
	keep, _ := probe.OptValue(kgo.KeepControlRecords).(bool)
	ends, err := kadm.NewClient(probe).ListEndOffsets(ctx, topic)
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
	cl := k.Client(t, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}), kgo.KeepControlRecords())...)
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
				if keep || !r.Attrs.IsControl() {
					out = append(out, r)
				}
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
	if out := resp.Offsets()[topic]; out != nil {
		return out
	}
	return map[int32]kadm.Offset{}
}

// NoPartitionVerification turns the brokers' transaction partition
// verification off (transaction.partition.verification.enable=false) until
// t ends, and waits until every broker reports it: a Produce of a version
// before KIP-890 can then open a transaction its coordinator does not know
// of (a hanging transaction). Apache Kafka only.
func (k *Kafka) NoPartitionVerification(t testing.TB) {
	t.Helper()
	const key = "transaction.partition.verification.enable"
	adm := k.Admin(t)
	set := func(v string) error {
		_, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Name: key, Value: &v}})
		return err
	}
	if err := set("false"); err != nil {
		t.Fatalf("set %s=false: %v", key, err)
	}
	t.Cleanup(func() { _ = set("true") })
	Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		brokers, err := adm.ListBrokers(t.Context())
		if err != nil {
			return false
		}
		rcs, err := adm.DescribeBrokerConfigs(t.Context(), brokers.NodeIDs()...)
		return err == nil && len(rcs) == len(brokers) && !slices.ContainsFunc(rcs, func(rc kadm.ResourceConfig) bool {
			return !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == key && c.Value != nil && *c.Value == "false" })
		})
	}, "every broker with %s=false", key)
}

// OpenTransactions counts the partitions of topic on which producer pid
// has a transaction open (DescribeProducers, KIP-664).
func (k *Kafka) OpenTransactions(t testing.TB, topic string, pid int64) int {
	t.Helper()
	ps, err := k.Admin(t).DescribeProducers(t.Context(), kadm.TopicsSet{topic: nil})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ps.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, pr := range p.ActiveProducers {
			if pr.ProducerID == pid && pr.CurrentTxnStartOffset >= 0 {
				n++
			}
		}
	})
	return n
}
