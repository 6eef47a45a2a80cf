package kafka_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

// eosSinkOn is eosSink with the source cluster's id.
func eosSinkOn(t *testing.T, addr, topic, id, sourceCluster string) *kafkasink.Sink {
	t.Helper()
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: id, Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0}, SourceClusterID: sourceCluster,
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// On the source cluster (the same cluster id) the exactly-once sink is the
// group's only committer (Capabilities.Offsets); on another it is not.
// CommitOffset of an advance past records that produced nothing commits it
// in a transaction of its own, which leaves the producer usable (its
// epoch as kgo knows it) and which a fenced sink cannot make.
func TestKafkaExactlyOnceCommitOffset(t *testing.T) {
	c := newKafkaCluster(t, kfake.ClusterID("source-1"))
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	if other := eosSinkOn(t, addr, topic, "replay-other", "source-2"); other.Capabilities().Offsets != nil {
		t.Fatal("a sink on another cluster than the source declares Offsets")
	}
	first := eosSinkOn(t, addr, topic, "replay-commit", "source-1")
	oc := first.Capabilities().Offsets
	if oc == nil {
		t.Fatal("a sink on the source cluster does not declare Offsets")
	}
	mustWrite(t, first, eosWindow(0, 10)...)
	committed := func(s *kafkasink.Sink) int64 {
		t.Helper()
		cps, err := s.Checkpoints(t.Context(), "replay.orders", "orders")
		if err != nil {
			t.Fatal(err)
		}
		return cps[0]
	}
	for _, next := range []int64{10, 25, 20} { // 10, 20: committed already
		if err := oc.CommitOffset(t.Context(), 0, next); err != nil {
			t.Fatalf("CommitOffset %d: %v", next, err)
		}
	}
	if got := committed(first); got != 25 {
		t.Fatalf("the group holds %d, want 25", got)
	}
	mustWrite(t, first, eosWindow(25, 30)...) // the producer still works
	if got := committed(first); got != 30 {
		t.Fatalf("after a write: the group holds %d, want 30", got)
	}
	second := eosSinkOn(t, addr, topic, "replay-commit", "source-1")
	err := oc.CommitOffset(t.Context(), 0, 40)
	var fe *kafkasink.FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("CommitOffset of a fenced sink: %v, want *FencedError", err)
	}
	if got := committed(second); got != 30 {
		t.Fatalf("after the fenced commit: the group holds %d, want 30", got)
	}
	if got := readIsolated(t, addr, topic, kgo.ReadCommitted()); len(got) != 15 {
		t.Fatalf("read_committed: %d messages, want 15", len(got))
	}
}

// Under run --join a Write commits as the process's member: one the group
// does not know (it lost its partitions) is refused, and Write fails with
// sinks.ErrPartitionLost (not transient: the member rejoins), its records
// invisible to read_committed consumers. No producer starts before the
// first Write (starting one fences the partition's owner).
func TestKafkaExactlyOnceJoinedMemberLostPartition(t *testing.T) {
	c := newKafkaCluster(t, kfake.ClusterID("source-1"))
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	owner := eosSinkOn(t, addr, topic, "replay-join", "source-1")
	mustWrite(t, owner, eosWindow(0, 5)...)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: "replay-join", Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0}, SourceClusterID: "source-1",
		Member:         func() (int32, string) { return 7, "replay-join-gone" },
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustWrite(t, owner, eosWindow(5, 10)...) // not fenced by the joined sink's start
	err = s.Write(t.Context(), eosWindow(10, 20))
	if !errors.Is(err, sinks.ErrPartitionLost) || sinks.Transient(err) {
		t.Fatalf("Write of a member the group does not know: %v, want sinks.ErrPartitionLost, not transient", err)
	}
	t.Logf("refused: %v", err)
	if got := readIsolated(t, addr, topic, kgo.ReadCommitted()); len(got) != 10 {
		t.Fatalf("read_committed: %d messages, want the owner's 10", len(got))
	}
}

// eosSinkTurningCommits is an exactly-once sink of its own cluster whose
// broker is handed an abort in place of each of the first turns EndTxn
// commits after the sink wrote from..to (as kgo's EndTransaction does when
// it turns a commit into an abort and returns nil); commits counts the
// EndTxn commit requests from then on.
func eosSinkTurningCommits(t *testing.T, id string, from, to int64, turns int32) (s *kafkasink.Sink, addr, topic string, commits *atomic.Int32) {
	t.Helper()
	c := newKafkaCluster(t)
	addr = c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic = createTopic(t, addr, 1, nil)
	s = eosSinkOn(t, addr, topic, id, "")
	if to > from {
		mustWrite(t, s, eosWindow(from, to)...)
	}
	commits = new(atomic.Int32)
	c.KeepControl()
	c.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if req := kr.(*kmsg.EndTxnRequest); req.Commit && commits.Add(1) <= turns {
			req.Commit = false // the broker aborts; kgo's EndTransaction returns nil
		}
		return nil, nil, false
	})
	return s, addr, topic, commits
}

// A commit that ends as an abort although EndTransaction returned nil is
// caught by reading the group's offset back: the batch is written again in
// a new transaction, and every record is read_committed exactly once.
func TestKafkaExactlyOnceCommitEndedAsAbort(t *testing.T) {
	s, addr, topic, commits := eosSinkTurningCommits(t, "replay-silent-abort", 0, 5, 2)
	mustWrite(t, s, eosWindow(5, 10)...)
	if n := commits.Load(); n != 3 {
		t.Fatalf("%d EndTxn commit requests, want 3: two turned into aborts, then the batch committed in a third transaction", n)
	}
	var offs []int64
	for _, r := range readIsolated(t, addr, topic, kgo.ReadCommitted()) {
		_, prov := provenance(t, r)
		o, _ := strconv.ParseInt(prov[kafkasink.HeaderSourceOffset], 10, 64)
		offs = append(offs, o)
	}
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(offs, want) {
		t.Fatalf("read_committed source offsets %v, want %v", offs, want)
	}
	cps, err := s.Checkpoints(t.Context(), "replay.orders", "orders")
	if err != nil || cps[0] != 10 {
		t.Fatalf("group offset %v (%v), want 10", cps, err)
	}
}

// A commit that keeps ending as an abort fails the Write transient after
// three transactions, and commits nothing of it.
func TestKafkaExactlyOnceCommitAlwaysEndedAsAbort(t *testing.T) {
	s, addr, topic, commits := eosSinkTurningCommits(t, "replay-always-abort", 0, 0, 1<<30)
	err := s.Write(t.Context(), eosWindow(0, 5))
	if err == nil || !sinks.Transient(err) || !strings.Contains(err.Error(), "ended as an abort") {
		t.Fatalf("Write whose commits all end as aborts: %v, want a transient error saying so", err)
	}
	t.Log(err)
	if n := commits.Load(); n != 3 {
		t.Errorf("%d EndTxn commit requests, want 3 (the Write's transactions)", n)
	}
	if n := len(readIsolated(t, addr, topic, kgo.ReadCommitted())); n != 0 {
		t.Fatalf("read_committed: %d messages, want none", n)
	}
}
