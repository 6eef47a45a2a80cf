package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/backoff"
)

// RetryPolicy says how a broker call that fails with an error Kafka calls
// retriable is retried: a leader or coordinator moving or loading, a
// request timed out, a dropped or refused connection.
type RetryPolicy struct {
	// MaxElapsed is how long one request may keep failing, from its first
	// failure, before the call gives up with a *RetryError; 0 retries
	// nothing.
	MaxElapsed time.Duration
	// RequestTimeout bounds each attempt: a request left unanswered this
	// long is abandoned and retried. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SettleDelay is the least wait before a commit whose attempt timed out
	// or lost its connection is sent again: the attempt may still reach
	// the coordinator, and must land before the retry does. Default
	// DefaultSettleDelay.
	SettleDelay time.Duration
	// MinBackoff is the first wait, doubled after each failure up to
	// MaxBackoff; each wait is jittered down by up to half. Defaults 100 ms
	// and 5 s.
	MinBackoff, MaxBackoff time.Duration
}

// DefaultRequestTimeout bounds one attempt of a broker call.
const DefaultRequestTimeout = 30 * time.Second

// DefaultSettleDelay is RetryPolicy.SettleDelay's default: above Kafka's
// offsets.commit.timeout.ms (5 s), within which a broker finishes or fails
// a commit it has read.
const DefaultSettleDelay = 6 * time.Second

// opFetch names a reader's Fetch in call.
const opFetch = "fetch"

// opCommit names OffsetCommit in call: its attempts of unknown outcome
// settle before a retry. opDelete names OffsetDelete, whose ACL is Delete
// on the group (aclNeeded).
const (
	opCommit = "offset commit"
	opDelete = "offset delete"
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.RequestTimeout <= 0 {
		p.RequestTimeout = DefaultRequestTimeout
	}
	if p.SettleDelay <= 0 {
		p.SettleDelay = DefaultSettleDelay
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = 100 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 5 * time.Second
	}
	return p
}

// RetryError is a broker call that kept failing with retriable errors
// until its budget (RetryPolicy.MaxElapsed) was spent. Err is the last
// error.
type RetryError struct {
	// Op names the request: "fetch", "list offsets", "offset commit", ...
	Op       string
	Attempts int
	Elapsed  time.Duration
	Budget   time.Duration
	Err      error
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("%s failed %d times in %s, which spends the retry budget of %s (retry.max_elapsed); last error: %v",
		e.Op, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Budget, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// call makes one request to the cluster, as every broker call of the
// source side does: each attempt runs under RequestTimeout, and a
// retriable failure refreshes the transports and is tried again after a
// jittered backoff until MaxElapsed from the first failure, then comes back
// as a *RetryError. op names the request; do must report in-answer errors
// that may pass (a leader moving) as errors.
func call[T any](ctx context.Context, c *Cluster, op string, do func(context.Context) (T, error)) (T, error) {
	return callWithin(ctx, c, op, nil, do)
}

// callWithin is call with each attempt under within(RequestTimeout)
// instead of RequestTimeout (nil: RequestTimeout): a JoinGroup waits for
// the other members, a heartbeat must be retried while the session lasts.
func callWithin[T any](ctx context.Context, c *Cluster, op string, within func(time.Duration) time.Duration, do func(context.Context) (T, error)) (T, error) {
	var p RetryPolicy
	if cp := c.policy.Load(); cp != nil {
		p = *cp
	}
	p = p.withDefaults()
	timeout := p.RequestTimeout
	if within != nil {
		timeout = within(timeout)
	}
	r := backoff.Policy{Min: p.MinBackoff, Max: p.MaxBackoff, Budget: p.MaxElapsed}.Start()
	// unsettled is when the last commit attempt of unknown outcome ended:
	// a commit that gives up waits until it cannot land any more (settle).
	var unsettled time.Time
	settle := func() {
		if !unsettled.IsZero() {
			time.Sleep(time.Until(unsettled.Add(p.SettleDelay)))
		}
	}
	for {
		actx, cancel := context.WithTimeout(ctx, timeout)
		v, err := do(actx)
		timedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			if op == opCommit {
				unsettled = time.Now() // cut off mid-request: it may land
				settle()
			}
			return v, err
		}
		if timedOut {
			err = &timeoutError{op: op, after: timeout, err: err}
		}
		err = explainRouting(err)
		if op == opCommit && unknownOutcome(err) {
			unsettled = time.Now()
		} else {
			unsettled = time.Time{}
		}
		if !retriable(err) || p.MaxElapsed <= 0 {
			settle()
			return v, aclNeeded(op, err)
		}
		d, left, ok := r.Failed()
		if !ok {
			settle()
			return v, &RetryError{Op: op, Attempts: r.Attempts(), Elapsed: r.Elapsed(), Budget: p.MaxElapsed, Err: dropped(err)}
		}
		c.retries.Add(1)
		if op != opFetch { // a reader refreshes its own transport
			c.refresh()
		}
		if !unsettled.IsZero() {
			d = max(d, p.SettleDelay) // the attempt may still land: let it
		}
		if log := c.log.Load(); log != nil {
			log.Warn().AnErr("error", dropped(err)).Str("request", op).Int("attempt", r.Attempts()).Int64("retry_in_ms", d.Milliseconds()).Int64("budget_left_ms", left.Milliseconds()).
				Msg("source cluster: retriable error, retrying")
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			settle()
			return v, err
		}
	}
}

// routingError is a request kafka-go could not route because its cached
// metadata lacks the topic, the partition or its leader (kafka-go's
// protocol.ErrNoTopic, ErrNoPartition, ErrNoLeader): during a leader
// election, after LEADER_NOT_AVAILABLE or a dropped Metadata request. The
// topic was seen before the request, so it passes with fresh metadata.
type routingError struct{ err error }

func (e *routingError) Error() string {
	return fmt.Sprintf("the cluster's metadata shows no leader for the partition now (a leader election, or LEADER_NOT_AVAILABLE): %v", e.err)
}

func (e *routingError) Unwrap() error { return e.err }

func explainRouting(err error) error {
	if errors.Is(err, protocol.ErrNoTopic) || errors.Is(err, protocol.ErrNoPartition) || errors.Is(err, protocol.ErrNoLeader) {
		return &routingError{err: err}
	}
	return err
}

// aclNeeded adds to the cluster's refusal of the principal (TOPIC_ or
// GROUP_AUTHORIZATION_FAILED) the ACL that the request op needs; other
// errors are returned as they are.
func aclNeeded(op string, err error) error {
	topic := errors.Is(err, kafka.TopicAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed)
	group := errors.Is(err, kafka.GroupAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed)
	need := "Read on the replay group (it implies Describe)"
	switch {
	case topic:
		need = "Read on the topic (it implies Describe)"
	case group && op == opDelete:
		need = "Delete on the replay group"
	case !group:
		return err
	}
	return fmt.Errorf("%w: the source cluster refuses this principal: grant it %s (kafka-acls.sh --add; see ACLs and permissions in docs/operations.md)", err, need)
}

// timeoutError is an attempt left unanswered for the request timeout.
type timeoutError struct {
	op    string
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer to %s within %s: %v", e.op, e.after, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// unknownOutcome reports whether a failed attempt may still have reached
// the broker: it timed out, or its connection failed after it was sent.
func unknownOutcome(err error) bool {
	return retriable(err) && !errors.As(err, new(kafka.Error)) && !errors.As(err, new(*kerr.Error)) && !errors.Is(err, syscall.ECONNREFUSED) && !errors.As(err, new(*routingError))
}

// retriable reports whether a broker call's failure may pass: a Kafka error
// code whose Retriable flag the protocol sets (kerr's table, by numeric
// code), an attempt timed out, or the network (refused, reset, EOF).
func retriable(err error) bool {
	var kerrv kafka.Error
	switch {
	case errors.As(err, new(*permanentError)):
		return false
	case errors.As(err, new(*timeoutError)), errors.Is(err, ErrNoAnswer), errors.As(err, new(*routingError)):
		return true
	case errors.As(err, &kerrv):
		return kerr.IsRetriable(kerr.ErrorForCode(int16(kerrv)))
	case errors.As(err, new(*kerr.Error)): // the control client's (control.go)
		return kerr.IsRetriable(err)
	case errors.Is(err, kgo.ErrClientClosed):
		return false
	case kgo.IsRetryableBrokerErr(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, new(net.Error)):
		return true
	}
	return false
}

// dropped returns err, unless it is franz-go's for a connection the broker
// closed before its first answer, which asks "is SASL missing?": the
// cluster was reached and authenticated at connect, so here it is a
// dropped connection, said so.
func dropped(err error) error {
	if errors.As(err, new(*kgo.ErrFirstReadEOF)) {
		return droppedError{err}
	}
	return err
}

// droppedError is a connection the broker closed before answering; it
// unwraps to franz-go's error.
type droppedError struct{ err error }

func (e droppedError) Error() string {
	return "the broker closed the connection before answering (EOF)"
}
func (e droppedError) Unwrap() error { return e.err }

// ErrOffsetOutOfRange is the broker's OFFSET_OUT_OF_RANGE: the offset read
// is below the log start (deleted) or above the log end. A *DataLossError
// wraps it.
var ErrOffsetOutOfRange error = kafka.OffsetOutOfRange

// Retriable reports whether a failure to join a group, or of a group call,
// may pass: a rebalance in progress, a coordinator loading or moving, the
// network. A call that spent its retry budget (*RetryError) may not.
func Retriable(err error) bool {
	var kerr kafka.Error
	switch {
	case errors.As(err, new(*RetryError)):
		return false // retried for the whole budget already
	case errors.Is(err, kafka.RebalanceInProgress), errors.Is(err, kafka.UnknownMemberId), errors.Is(err, kafka.IllegalGeneration):
		return true
	case errors.As(err, &kerr):
		return kerr.Temporary()
	case errors.As(err, new(net.Error)), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	return false
}
