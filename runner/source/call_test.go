package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestRetriableFollowsKafkasTable checks the classification of call:
// Kafka's Retriable flag by numeric code, kafka-go's routing and
// no-answer stand-ins, and the network.
func TestRetriableFollowsKafkasTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kafka.NotLeaderForPartition, true}, {kafka.LeaderNotAvailable, true}, {kafka.UnknownTopicOrPartition, true},
		{kafka.RequestTimedOut, true}, {kafka.NotCoordinatorForGroup, true}, {kafka.GroupLoadInProgress, true},
		{kafka.GroupCoordinatorNotAvailable, true}, {fmt.Errorf("p 0: %w", kafka.NotLeaderForPartition), true},
		{kafka.OffsetOutOfRange, false}, {kafka.Unknown, false}, {kafka.GroupAuthorizationFailed, false}, {kafka.IllegalGeneration, false},
		{ErrNoAnswer, true}, {io.ErrUnexpectedEOF, true}, {syscall.ECONNRESET, true}, {syscall.ECONNREFUSED, true},
		{explainRouting(protocol.ErrNoPartition), true}, {errors.New("boom"), false}, {context.Canceled, false},
	} {
		if got := retriable(tc.err); got != tc.want {
			t.Errorf("retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestCallRetriesUntilTheBudget: a retriable failure is retried with
// backoff, an answer ends the loop, and a failure that lasts gives up
// with a *RetryError once MaxElapsed has passed.
func TestCallRetriesUntilTheBudget(t *testing.T) {
	c := &Cluster{}
	c.SetRetry(RetryPolicy{MaxElapsed: 200 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	c.transport = &kafka.Transport{}
	n := 0
	v, err := call(context.Background(), c, "list offsets", func(context.Context) (int, error) {
		if n++; n < 3 {
			return 0, kafka.NotLeaderForPartition
		}
		return 7, nil
	})
	if v != 7 || err != nil || n != 3 {
		t.Fatalf("call = %d, %v after %d attempts; want 7, nil after 3", v, err, n)
	}
	start := time.Now()
	_, err = call(context.Background(), c, "list offsets", func(context.Context) (int, error) { return 0, kafka.GroupLoadInProgress })
	var re *RetryError
	if !errors.As(err, &re) || !errors.Is(err, kafka.GroupLoadInProgress) {
		t.Fatalf("want a *RetryError wrapping the last error, got %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s, want about the 200ms budget", d)
	}
	n = 0
	_, err = call(context.Background(), c, "list offsets", func(context.Context) (int, error) { n++; return 0, kafka.OffsetOutOfRange })
	if n != 1 || !errors.Is(err, kafka.OffsetOutOfRange) {
		t.Errorf("a non-retriable error was tried %d times (%v), want once", n, err)
	}
}

// TestCallTimesOutAnUnansweredRequest: an attempt that gets no answer is
// abandoned after RequestTimeout and retried.
func TestCallTimesOutAnUnansweredRequest(t *testing.T) {
	c := &Cluster{transport: &kafka.Transport{}}
	c.SetRetry(RetryPolicy{MaxElapsed: time.Second, RequestTimeout: 50 * time.Millisecond, MinBackoff: time.Millisecond})
	n := 0
	v, err := call(context.Background(), c, "fetch", func(ctx context.Context) (int, error) {
		if n++; n == 1 {
			<-ctx.Done() // never answered
			return 0, ctx.Err()
		}
		return 1, nil
	})
	if v != 1 || err != nil || n != 2 {
		t.Fatalf("call = %d, %v after %d attempts; want 1, nil after 2", v, err, n)
	}
}

// TestCallCommitSettlesWhenItGivesUp: a commit whose last attempt timed out
// (it may still land) returns only once SettleDelay has passed since that
// attempt, whether it gives up because the budget is spent or because its
// context ended; a commit refused with an answer returns at once.
func TestCallCommitSettlesWhenItGivesUp(t *testing.T) {
	const settle = 300 * time.Millisecond
	c := &Cluster{transport: &kafka.Transport{}}
	c.SetRetry(RetryPolicy{MaxElapsed: 100 * time.Millisecond, RequestTimeout: 20 * time.Millisecond, SettleDelay: settle,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	var lastEnd time.Time
	unanswered := func(ctx context.Context) (int, error) {
		<-ctx.Done()
		lastEnd = time.Now()
		return 0, ctx.Err()
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration // of the caller's context; 0 none
	}{{"budget spent", 0}, {"context ended", 50 * time.Millisecond}} {
		ctx := context.Background()
		if tc.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			defer cancel()
		}
		_, err := call(ctx, c, opCommit, unanswered)
		if err == nil {
			t.Fatalf("%s: a commit never answered succeeded", tc.name)
		}
		if d := time.Since(lastEnd); d < settle-10*time.Millisecond {
			t.Errorf("%s: returned %s after its last attempt (%v), want at least the settle delay %s", tc.name, d, err, settle)
		}
	}
	start := time.Now()
	_, err := call(context.Background(), c, opCommit, func(context.Context) (int, error) { return 0, kafka.GroupLoadInProgress })
	if err == nil || time.Since(start) > settle {
		t.Errorf("a commit refused with an answer took %s (%v), want no settle wait", time.Since(start), err)
	}
}

// TestCallSaysADroppedConnection: a connection the broker drops before its
// first answer is retried and logged as what it is, not with franz-go's
// "is SASL missing?" (the cluster was reached at connect).
func TestCallSaysADroppedConnection(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var n atomic.Int32
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if n.Add(1) == 1 {
			return nil, errors.New("dropped"), true // the connection is closed, unanswered
		}
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var logs bytes.Buffer
	c := &Cluster{transport: &kafka.Transport{}}
	c.SetLog(zerolog.New(&logs))
	c.SetRetry(RetryPolicy{MaxElapsed: 5 * time.Second, MinBackoff: time.Millisecond})
	_, err = call(t.Context(), c, "metadata", func(ctx context.Context) (*kmsg.MetadataResponse, error) {
		return kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the broker closed the connection before answering") || strings.Contains(logs.String(), "SASL") {
		t.Errorf("the retry's log line does not say the connection was dropped:\n%s", logs.String())
	}
	testenv.MillisFields(t, logs.String(), "retriable error, retrying", "retry_in_ms", "budget_left_ms")
}
