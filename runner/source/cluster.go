// Package source is replay's only client of the source Kafka cluster: the
// connection, the broker calls that resolve a window, the bounded
// partition reader, and the group calls that read and store checkpoints.
//
// Its API takes and returns plain values, no kafka-go type. Errors the
// caller acts on are typed (*PartitionError, *DataLossError,
// *GroupInUseError, *ForeignMemberError) or sentinels (ErrFenced,
// ErrOffsetOutOfRange). Every request goes through call, which classifies
// its errors.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/kafkaconn"
	"github.com/replay-tool/replay/plan"
)

// Cluster is a connection to the source Kafka cluster: one transport
// (connection pool, metadata cache, TLS and SASL) shared by the client used
// for ListOffsets, commits and group calls, and a small pool of transports
// for the protocol-level fetches of the window read. It is safe for
// concurrent use.
type Cluster struct {
	fetchMu  sync.Mutex
	fetchers []*kafka.Transport
	// mem is what the readers share (FetchBudget), made once.
	memOnce sync.Once
	mem     *readerMemory

	client    *kafka.Client
	transport *kafka.Transport
	// ctl is the control client (control): commits and ListOffsets,
	// batched, with the coordinator cached; started on first use.
	ctlMu sync.Mutex
	ctl   *kgo.Client
	// Brokers are the bootstrap brokers that answered the probe.
	Brokers []string
	// ID is the cluster id the brokers report (Metadata's ClusterID); ""
	// when they report none.
	ID string
	// Warnings are things about the connection the caller must show the
	// user (e.g. certificate verification turned off).
	Warnings []string
	conn     *kafkaconn.Conn
	// policy is how call retries; the zero policy (during Connect's probe)
	// retries nothing.
	policy  atomic.Pointer[RetryPolicy]
	retries atomic.Int64
	// log receives each retry (call); nil logs nothing.
	log atomic.Pointer[zerolog.Logger]
}

// DefaultProbeTimeout bounds the first exchange with the cluster (Connect).
const DefaultProbeTimeout = 15 * time.Second

// ConnectOption changes how Connect reaches the cluster.
type ConnectOption func(*connectConfig)

type connectConfig struct {
	probeTimeout time.Duration
	retry        RetryPolicy
}

// WithRetry sets how the cluster's broker calls retry errors that may pass
// (RetryPolicy); without it, nothing is retried. Connect's own probe is
// never retried: a wrong address or TLS setting fails at once.
func WithRetry(p RetryPolicy) ConnectOption {
	return func(c *connectConfig) { c.retry = p }
}

// WithProbeTimeout bounds Connect's first exchange with the cluster (the
// bootstrap probe and the Metadata request); DefaultProbeTimeout otherwise.
func WithProbeTimeout(d time.Duration) ConnectOption {
	return func(c *connectConfig) {
		if d > 0 {
			c.probeTimeout = d
		}
	}
}

// Connect builds the transport for src and checks that the cluster answers
// (the bootstrap probe, kafkaconn.Conn.Probe, then Metadata). Errors say
// what to fix and never hold the password; Cluster.Warnings lists insecure
// settings the caller must show.
func Connect(ctx context.Context, src plan.Source, opts ...ConnectOption) (*Cluster, error) {
	cfg := connectConfig{probeTimeout: DefaultProbeTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	topics := []string{src.Topic}
	if src.Topic == "" { // source.topics
		topics = src.Topics
	}
	conn, err := kafkaconn.New(kafkaconn.Settings{Section: "source", Brokers: plan.BrokerList(src.Brokers),
		TLS: src.TLS, SASL: src.SASL, ClientID: src.ClientID, MetadataTopics: topics})
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		client:    &kafka.Client{Addr: conn.Addr(), Transport: conn.Transport, Timeout: 30 * time.Second},
		transport: conn.Transport,
		conn:      conn,
	}
	if err := c.probe(ctx, topics, cfg.probeTimeout); err != nil {
		c.Close()
		return nil, err
	}
	c.policy.Store(&cfg.retry)
	return c, nil
}

// SetRetry changes how the cluster's broker calls retry (WithRetry): a
// run sets its plan's retry section.
func (c *Cluster) SetRetry(p RetryPolicy) { c.policy.Store(&p) }

// Retries is how many broker calls failed with a retriable error and were
// tried again since Connect.
func (c *Cluster) Retries() int64 { return c.retries.Load() }

// SetLog makes every retry of a broker call (call) a warning on l, with
// the request, the attempt, the wait and what is left of the budget.
func (c *Cluster) SetLog(l zerolog.Logger) { c.log.Store(&l) }

// refresh drops the client transport's idle connections after a retriable
// failure, so the next request dials anew with fresh metadata, and makes
// the control client forget the topics' metadata (it would keep a
// LEADER_NOT_AVAILABLE for MetadataMinAge).
func (c *Cluster) refresh() {
	c.transport.CloseIdleConnections()
	c.ctlMu.Lock()
	ctl := c.ctl
	c.ctlMu.Unlock()
	if ctl != nil && c.conn != nil && len(c.conn.MetadataTopics) > 0 {
		ctl.PurgeTopicsFromClient(c.conn.MetadataTopics...)
	}
}

// probe fails early with a message a person can act on: the bootstrap
// brokers are probed in turn (kafkaconn.Conn.Probe), then the topic's
// metadata is read from the ones that answered.
func (c *Cluster) probe(ctx context.Context, topics []string, timeout time.Duration) error {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := c.conn.Probe(pctx, timeout)
	c.Brokers, c.Warnings = c.conn.Brokers, c.conn.Warnings
	if err != nil {
		return err
	}
	c.client.Addr = c.conn.Addr()
	// The brokers spoke Kafka: a failed Metadata request is retried until
	// the deadline, except that without SASL a broker closing every
	// connection may require it (probeDropBudget).
	budget := timeout
	if c.conn.SASL.Mechanism == "" {
		budget = min(timeout, probeDropBudget)
	}
	c.policy.Store(&RetryPolicy{MaxElapsed: timeout, RequestTimeout: timeout / 3, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	defer c.policy.Store(&RetryPolicy{})
	var dropped time.Time
	md, err := call(pctx, c, "metadata", func(ctx context.Context) (*kafka.MetadataResponse, error) {
		md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		if closedConn(err) {
			if dropped.IsZero() {
				dropped = time.Now()
			}
			if time.Since(dropped) >= budget {
				return nil, &permanentError{err: err} // every attempt closed: not a drop
			}
		}
		return md, err
	})
	if err != nil {
		if errors.As(err, new(*timeoutError)) || errors.Is(err, context.DeadlineExceeded) && !closedConn(err) {
			return fmt.Errorf("the brokers %s answered the probe, but not the Metadata request for topic %s within %s (%w): the cluster may be overloaded or restarting; try again when it is healthy",
				strings.Join(c.Brokers, ","), strings.Join(topics, ", "), time.Since(start).Round(time.Second), err)
		}
		return c.conn.Explain(strings.Join(c.Brokers, ","), err, time.Since(start))
	}
	c.ID = md.ClusterID
	return nil
}

// probeDropBudget is how long Connect retries a Metadata request whose
// connection the broker closes, without SASL: a drop passes within it, a
// broker that requires SASL closes every one.
const probeDropBudget = 2 * time.Second

// closedConn reports whether err is a connection the broker closed.
func closedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// permanentError is a failure call must not retry.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

func (e *permanentError) Unwrap() error { return e.err }

// Close releases idle connections and the control client's.
func (c *Cluster) Close() {
	c.transport.CloseIdleConnections()
	c.ctlMu.Lock()
	if c.ctl != nil {
		c.ctl.Close()
		c.ctl = nil
	}
	c.ctlMu.Unlock()
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	for _, t := range c.fetchers {
		if t != nil { // created on first use
			t.CloseIdleConnections()
		}
	}
}

// fetchConns is how many connections per broker carry window reads. kafka-go
// decodes each connection's responses on one goroutine, so one shared
// connection would decode every partition's records on a single core.
var fetchConns = 2 * runtime.GOMAXPROCS(0)

// fetchTransport returns the transport that carries partition's fetches:
// one of fetchConns transports configured like c.transport (TLS, SASL),
// each with its own connections, so responses decode in parallel.
func (c *Cluster) fetchTransport(partition int32) *kafka.Transport {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchers == nil {
		c.fetchers = make([]*kafka.Transport, max(fetchConns, 1))
	}
	i := int(partition) % len(c.fetchers)
	if c.fetchers[i] == nil {
		c.fetchers[i] = c.conn.NewTransport()
	}
	return c.fetchers[i]
}
