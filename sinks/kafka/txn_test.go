package kafka_test

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// eosHarness runs the conformance suite on the exactly-once kafka sink. The
// source topic "orders" of the suite's records exists on the cluster (the
// group's offsets are kept for it); each target topic has commit metadata
// of its own, so the group's offsets of one subtest are not another's.
type eosHarness struct {
	kafkaHarness
	group string
}

func (h *eosHarness) NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink {
	topic := h.topic(t)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{h.addr}, Topic: topic, KeepPartition: h.keep,
		KeyTemplate: keyer.Templated(), PlanName: "conformance", Log: zerolog.New(zerolog.NewTestWriter(t)),
		ExactlyOnce: true, TransactionalID: "conformance-" + topic, Group: h.group, SourceTopic: "orders",
		CommitMetadata: func(p int32) string { return fmt.Sprintf(`{"tool":"replay","plan":%q,"start":0,"end":100000}`, topic) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *eosHarness) New(t *testing.T) sinks.Sink { return h.NewKeyed(t, nil) }

// Contents are the latest message of each idempotency key (the replay-key
// header: the message key is the source record's) a read_committed
// consumer sees, as for the at-least-once sink (the suite's notion of a
// kafka target's contents); the tests of this file count every message.
func (h *eosHarness) Contents(t *testing.T) []string {
	latest := map[string]string{}
	for _, r := range readIsolated(t, h.addr, h.topic(t), kgo.ReadCommitted()) {
		_, prov := provenance(t, r)
		latest[prov[kafkasink.HeaderKey]] = storedFromMessage(t, r).String()
	}
	out := make([]string, 0, len(latest))
	for _, s := range latest {
		out = append(out, s)
	}
	return out
}

// The exactly-once sink keeps every promise of a sink, and records the
// group's offsets in its transactions (a checkpoint store). Its Contents
// are read read_committed.
func TestKafkaExactlyOnceConformance(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 8)
	sinktest.RunWith(t, &eosHarness{kafkaHarness: kafkaHarness{addr: addr, partitions: 3}, group: "replay.conformance"},
		sinktest.Features{Durable: sinktest.OnWrite, CheckpointGroup: "replay.conformance"})
}

// createTopicNamed creates topic with the given partitions.
func createTopicNamed(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// eosSink opens an exactly-once sink of group replay.orders for source
// topic orders, partition 0.
func eosSink(t *testing.T, addr, topic, id string) (*kafkasink.Sink, error) {
	return kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: id, Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0},
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
}

func eosWindow(from, to int64) []record.Record {
	var b []record.Record
	for o := from; o < to; o++ {
		b = append(b, rec(0, o, fmt.Sprintf("k%d", o), fmt.Sprintf("v%d", o)))
	}
	return b
}

// A second sink with the same transactional id fences the first: its next
// Write fails with *FencedError naming the id, and commits nothing.
func TestKafkaExactlyOnceFenced(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	first, err := eosSink(t, addr, topic, "replay-fence")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	mustWrite(t, first, eosWindow(0, 10)...)
	second, err := eosSink(t, addr, topic, "replay-fence")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	err = first.Write(t.Context(), eosWindow(10, 20))
	var fe *kafkasink.FencedError
	if !errors.As(err, &fe) || fe.TransactionalID != "replay-fence-0" {
		t.Fatalf("Write of the fenced sink: %v, want a *FencedError for replay-fence-0", err)
	}
	if sinks.Transient(err) {
		t.Fatalf("a fenced producer must not be retried: %v", err)
	}
	mustWrite(t, second, eosWindow(10, 20)...)
	got := readIsolated(t, addr, topic, kgo.ReadCommitted())
	if len(got) != 20 {
		t.Fatalf("read_committed: %d messages, want 20 (each record once)", len(got))
	}
	cps, err := second.Checkpoints(t.Context(), "replay.orders", "orders")
	if err != nil || cps[0] != 20 {
		t.Fatalf("checkpoints %v (%v), want partition 0 at 20", cps, err)
	}
}

// A process that died mid-transaction leaves records that a
// read_uncommitted consumer sees but a read_committed one does not: the
// next sink with the same transactional id aborts the transaction when it
// starts, and resumes from the offset the last committed transaction
// recorded.
func TestKafkaExactlyOnceAbortedTransactionHidden(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	s, err := eosSink(t, addr, topic, "replay-crash")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, eosWindow(0, 10)...)
	_ = s.Close()

	// The crashed process: a transaction of the same id, never ended.
	zombie, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("replay-crash-0"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := zombie.ProduceSync(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "aborted-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	s2, err := eosSink(t, addr, topic, "replay-crash")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cps, err := s2.Checkpoints(t.Context(), "replay.orders", "orders")
	if err != nil || cps[0] != 10 {
		t.Fatalf("checkpoints after the crash: %v (%v), want partition 0 at 10", cps, err)
	}
	mustWrite(t, s2, eosWindow(5, 20)...) // a re-delivery from before the checkpoint
	committed := readIsolated(t, addr, topic, kgo.ReadCommitted())
	uncommitted := readIsolated(t, addr, topic, kgo.ReadUncommitted())
	if len(committed) != 20 {
		t.Fatalf("read_committed: %d messages, want 20", len(committed))
	}
	for i, r := range committed {
		if want := fmt.Sprintf("v%d", i); string(r.Value) != want {
			t.Fatalf("read_committed message %d is %q, want %q", i, r.Value, want)
		}
	}
	// read_uncommitted sees the committed twenty, the crashed process's
	// five, and a copy of any batch whose transaction the sink aborted and
	// wrote again (a commit the broker answered with a retriable error is
	// aborted and retried): never a record outside the window.
	zombies, retried := 0, 0
	seen := map[string]int{}
	for _, r := range uncommitted {
		v := string(r.Value)
		var n int
		_, notWindow := fmt.Sscanf(v, "v%d", &n)
		switch {
		case strings.HasPrefix(v, "aborted-"):
			zombies++
		case notWindow == nil && n >= 0 && n < 20 && v == fmt.Sprintf("v%d", n):
			if seen[v]++; seen[v] > 1 {
				retried++
			}
		default:
			t.Fatalf("read_uncommitted holds %q, a record neither the sink nor the crashed process wrote", v)
		}
	}
	if zombies != 5 || len(seen) != 20 || len(uncommitted) != 25+retried {
		t.Fatalf("read_uncommitted: %d messages (%d of the crashed process, %d distinct of the window, %d retried copies), want the aborted five and the window's twenty",
			len(uncommitted), zombies, len(seen), retried)
	}
	// Two transactions committed and the crashed one aborted, each ended
	// by a marker; a retried transaction adds its own abort marker.
	if n := controlRecords(t, addr, topic); n < 3 || (retried == 0 && n != 3) {
		t.Fatalf("%d transaction markers (%d retried copies), want 3: two commits and the abort", n, retried)
	}
}

// A target without the source topic cannot hold the group's offsets: New
// says so before anything is produced.
func TestKafkaExactlyOnceNeedsSourceTopicOnTarget(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	_, err := eosSink(t, addr, topic, "replay-x")
	if err == nil || !strings.Contains(err.Error(), "the source topic orders (with at least 1 partitions) is not on the target cluster") {
		t.Fatalf("New: %v", err)
	}
}

// readIsolated reads topic as a consumer of the isolation level: it keeps
// the control records (transaction markers) while reading, so that it
// reaches the high watermark, and returns the data records.
func readIsolated(t *testing.T, addr, topic string, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, r := range readTopic(t, addr, topic, nil, kgo.FetchIsolationLevel(level), kgo.KeepControlRecords()) {
		if !r.Attrs.IsControl() {
			out = append(out, r)
		}
	}
	return out
}

// controlRecords counts the transaction markers of topic.
func controlRecords(t *testing.T, addr, topic string) int {
	t.Helper()
	n := 0
	for _, r := range readTopic(t, addr, topic, nil, kgo.KeepControlRecords()) {
		if r.Attrs.IsControl() {
			n++
		}
	}
	return n
}

// A principal without the TransactionalId ACL is told so by New, with the
// ACLs to grant, before anything is produced.
func TestKafkaExactlyOnceTransactionalIDACL(t *testing.T) {
	all := func(res kmsg.ACLResourceType, name string) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	c := newKafkaCluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "replay", "replay-pw", all(kmsg.ACLResourceTypeTopic, "*"), all(kmsg.ACLResourceTypeGroup, "*"),
			all(kmsg.ACLResourceTypeCluster, "kafka-cluster")),
		kfake.SeedTopics(1, "orders", "target"))
	addr := c.ListenAddrs()[0]
	_, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: "target", PlanName: "orders",
		SASL:        plan.SASL{Mechanism: "SCRAM-SHA-512", Username: "replay", Password: "replay-pw"},
		ExactlyOnce: true, Group: "replay.orders", SourceTopic: "orders", Partitions: []int32{0}})
	want := "refuses transactional id replay-orders-"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "grant it Write on TransactionalId") {
		t.Fatalf("New without the TransactionalId ACL: %v, want an error containing %q and the ACLs to grant", err, want)
	}
	t.Log(err)
}

// A transaction that outlives transaction.timeout.ms is aborted by the
// broker: Write aborts too and fails with a transient error (the runner
// writes the batch again), not a fencing; the retry commits the batch once.
func TestKafkaExactlyOnceTransactionTimeout(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: "replay-timeout", Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0}, TransactionTimeout: 200 * time.Millisecond,
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin := kadm.NewClient(newClient(t, addr))
	var once atomic.Bool
	// The first AddOffsetsToTxn waits until the broker aborted the
	// transaction for its timeout.
	c.ControlKey(int16(kmsg.AddOffsetsToTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !once.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		c.SleepControl(func() {
			_ = testenv.WaitFor(t.Context(), 10*time.Millisecond, func() bool {
				d, err := admin.DescribeTransactions(t.Context(), "replay-timeout-0")
				return err == nil && d["replay-timeout-0"].State != "Ongoing"
			})
		})
		return nil, nil, false
	})
	err = s.Write(t.Context(), eosWindow(0, 10))
	var fe *kafkasink.FencedError
	if err == nil || errors.As(err, &fe) || !sinks.Transient(err) {
		t.Fatalf("Write of a timed-out transaction: %v, want a transient error", err)
	}
	t.Log(err)
	mustWrite(t, s, eosWindow(0, 10)...)
	if n := len(readIsolated(t, addr, topic, kgo.ReadCommitted())); n != 10 {
		t.Fatalf("read_committed: %d messages, want 10", n)
	}
}

func newClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// The exactly-once sink's record batches stay under the topic's
// max.message.bytes, as the at-least-once sink's do, and a record too large
// by itself is the *record.Error, with nothing of its batch committed.
// (Without the cap, the producer puts a Write's records in batches over
// the limit, and the broker refuses them all.)
func TestKafkaExactlyOnceTopicMaxMessageBytes(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, map[string]string{"max.message.bytes": "2000"})
	s, err := eosSink(t, addr, topic, "replay-size")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var batch []record.Record
	for i := range 40 { // ~300 B each: 12 KB in all, six times the limit
		// Random padding: the producer compresses, and repeated bytes
		// would shrink a batch of all 40 under the limit.
		pad := make([]byte, 125)
		_, _ = crand.Read(pad)
		batch = append(batch, rec(0, int64(i), "", fmt.Sprintf(`{"id":%d,"pad":%q}`, i, hex.EncodeToString(pad))))
	}
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatalf("records that each fit the topic's limit: %v", err)
	}
	big := rec(0, 41, "", fmt.Sprintf(`{"id":41,"pad":%q}`, strings.Repeat("p", 3000)))
	var re *record.Error
	err = s.Write(t.Context(), []record.Record{rec(0, 40, "", `{"id":40}`), big})
	if !errors.As(err, &re) || re.Offset != 41 || !strings.Contains(err.Error(), "max.message.bytes, 2000") {
		t.Errorf("a record over the topic's limit: Write = %v, want a *record.Error for offset 41 naming the limit", err)
	}
	if n := len(readIsolated(t, addr, topic, kgo.ReadCommitted())); n != 40 {
		t.Fatalf("read_committed: %d messages, want 40", n)
	}
}
