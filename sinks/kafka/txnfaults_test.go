package kafka_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

// failFirst makes the cluster fail the first n InitProducerID requests:
// with code, or by closing the connection when code is nil.
func failFirst(c *kfake.Cluster, n int32, code *kerr.Error) *atomic.Int32 {
	var seen atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if seen.Add(1) > n {
			return nil, nil, false
		}
		if code == nil {
			return nil, errors.New("testenv: connection dropped"), true
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = code.Code
		return resp, nil, true
	})
	return &seen
}

// eosSinkBudget is eosSink with a retry budget and its log kept.
func eosSinkBudget(t *testing.T, addr, topic, id string, budget time.Duration) (*kafkasink.Sink, *testenv.Buffer, error) {
	buf := &testenv.Buffer{}
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.MultiLevelWriter(buf, zerolog.NewTestWriter(t))), ExactlyOnce: true, TransactionalID: id,
		Group: "replay.orders", SourceTopic: "orders", Partitions: []int32{0}, RetryBudget: budget,
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	return s, buf, err
}

// The exactly-once sink's InitProducerID, answered with a dropped
// connection or an error Kafka calls retriable more often than franz-go
// retries it by itself, is retried within the sink's retry budget, each
// retry counted and logged; New succeeds and the sink writes exactly
// once. Before, a drop failed New at once with franz-go's "is SASL
// missing?", and COORDINATOR_NOT_AVAILABLE with "does not run
// transactions".
func TestKafkaExactlyOnceStartRidesOutFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int32
		code *kerr.Error
	}{
		{"dropped connection", 3, nil},
		{"COORDINATOR_NOT_AVAILABLE", 8, kerr.CoordinatorNotAvailable},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			c := newKafkaCluster(t)
			addr := c.ListenAddrs()[0]
			createTopicNamed(t, addr, "orders", 1)
			topic := createTopic(t, addr, 1, nil)
			seen := failFirst(c, tc.n, tc.code)
			start := time.Now()
			s, log, err := eosSinkBudget(t, addr, topic, "replay-start", time.Minute)
			if err != nil {
				t.Fatalf("New after %d failed InitProducerIDs: %v", tc.n, err)
			}
			defer s.Close()
			t.Logf("%d InitProducerIDs, %d retries of the sink, %s", seen.Load(), s.Retries(), time.Since(start).Round(time.Millisecond))
			if seen.Load() <= tc.n {
				t.Fatalf("%d InitProducerIDs, want more than the %d failed", seen.Load(), tc.n)
			}
			mustWrite(t, s, eosWindow(0, 10)...)
			if n := len(readIsolated(t, addr, topic, kgo.ReadCommitted())); n != 10 {
				t.Fatalf("read_committed: %d messages, want 10", n)
			}
			if tc.code != nil && (s.Retries() == 0 || !strings.Contains(log.String(), "transient error, retrying")) {
				t.Errorf("%d retries counted, log %q: want the sink's retries counted and logged", s.Retries(), log.String())
			}
			if tc.code != nil {
				testenv.MillisFields(t, log.String(), "transient error, retrying", "retry_in_ms", "budget_left_ms")
			}
		})
	}
}

// An InitProducerID that keeps failing retriably fails New once the
// sink's retry budget is spent, with a *RetryError that names the call,
// the budget's field, the last error and how to resume.
func TestKafkaExactlyOnceStartBudgetSpent(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	failFirst(c, 1<<30, kerr.CoordinatorNotAvailable)
	start := time.Now()
	_, _, err := eosSinkBudget(t, addr, topic, "replay-spent", time.Second)
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	var re *kafkasink.RetryError
	if !errors.As(err, &re) || re.Attempts < 2 {
		t.Fatalf("New: %v, want a *kafkasink.RetryError after two attempts or more", err)
	}
	for _, want := range []string{"start the transactional producers", "sink.retry.max_elapsed", "COORDINATOR_NOT_AVAILABLE",
		"re-run the same command to resume", "may not run transactions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if strings.Contains(err.Error(), "SASL") {
		t.Errorf("error mentions SASL: %v", err)
	}
}

// A partition whose producer is starting again (InitProducerID) while its
// transaction coordinator does not answer holds up only its own writes:
// another partition's Write goes on at once.
func TestKafkaExactlyOnceSlowStartHoldsUpOnlyItsPartition(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 2)
	topic := createTopic(t, addr, 2, nil)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: "replay-slow", Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0, 1}, RetryBudget: time.Minute,
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	part := func(p int32, from, to int64) []record.Record {
		b := eosWindow(from, to)
		for i := range b {
			b[i].Partition = p
		}
		return b
	}
	mustWrite(t, s, part(0, 0, 5)...)
	mustWrite(t, s, part(1, 0, 5)...)
	// A write the broker refuses retires partition 0's producer.
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return produceRefused(req, kerr.InvalidRecord.Code), nil, true
	})
	if err := s.Write(t.Context(), part(0, 5, 10)); err == nil {
		t.Fatal("Write refused by the broker succeeded")
	}
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if id := req.(*kmsg.InitProducerIDRequest).TransactionalID; id == nil || *id != "replay-slow-0" {
			return nil, nil, false
		}
		select {
		case held <- struct{}{}:
		default:
		}
		c.SleepControl(func() {
			select {
			case <-release:
			case <-time.After(8 * time.Second):
			}
		})
		return nil, nil, false
	})
	slow := make(chan error, 1)
	go func() { slow <- s.Write(t.Context(), part(0, 5, 10)) }()
	<-held
	start := time.Now()
	err = s.Write(t.Context(), part(1, 5, 10))
	took := time.Since(start)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if took > 3*time.Second {
		t.Errorf("partition 1's Write took %s while partition 0's producer was starting: want it not held up", took.Round(time.Millisecond))
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// A transaction whose produce request the target never answers (the
// connection drops under it, again and again) ends when Write's context
// does, with a transient error, instead of franz-go retrying the messages
// it cannot tell were written for as long as the target is down.
func TestKafkaExactlyOnceProduceEndsWithTheContext(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	s, err := eosSink(t, addr, topic, "replay-unanswered")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var down atomic.Bool
	down.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		return nil, errors.New("testenv: connection dropped"), true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, eosWindow(0, 10)) }()
	select {
	case err := <-done:
		if !sinks.Transient(err) {
			t.Fatalf("Write: %v, want a transient error", err)
		}
		t.Logf("Write: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Write still running 18s after its context ended")
	}
	down.Store(false)
	mustWrite(t, s, eosWindow(0, 10)...)
	if n := len(readIsolated(t, addr, topic, kgo.ReadCommitted())); n != 10 {
		t.Fatalf("read_committed: %d messages, want 10", n)
	}
}

// A transactional id the principal may no longer write (its ACL taken
// away mid-run) fails the Write at once, naming the ACL to grant.
func TestKafkaExactlyOnceTransactionalIDRefusedNamesTheACL(t *testing.T) {
	c := newKafkaCluster(t)
	addr := c.ListenAddrs()[0]
	createTopicNamed(t, addr, "orders", 1)
	topic := createTopic(t, addr, 1, nil)
	s, err := kafkasink.New(t.Context(), kafkasink.Config{Brokers: []string{addr}, Topic: topic, PlanName: "orders",
		Log: zerolog.New(zerolog.NewTestWriter(t)), ExactlyOnce: true, TransactionalID: "replay-acl", Group: "replay.orders",
		SourceTopic: "orders", Partitions: []int32{0}, RetryBudget: time.Minute,
		CommitMetadata: func(int32) string { return `{"tool":"replay","plan":"orders","start":0,"end":1000}` }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustWrite(t, s, eosWindow(0, 5)...)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceRefused(req, kerr.TransactionalIDAuthorizationFailed.Code), nil, true
	})
	err = s.Write(t.Context(), eosWindow(5, 10))
	if err == nil || !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || !strings.Contains(err.Error(), "grant it Write on the TransactionalIds with the prefix replay-acl") {
		t.Fatalf("Write = %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED naming the ACL to grant", err)
	}
}
