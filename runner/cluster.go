// Package runner resolves a plan's window to fixed per-partition offset
// ranges, reads exactly those ranges, hands the records to a sink and
// checkpoints progress in the plan's dedicated replay consumer group.
package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// Cluster is a connection to the source Kafka cluster: one kafka-go
// Transport (connection pool, metadata cache, TLS and SASL) shared by the
// Client used for ListOffsets, commits and group checks and by the
// protocol-level fetches of the window read.
type Cluster struct {
	fetchMu  sync.Mutex
	fetchers []*kafka.Transport

	Client    *kafka.Client
	Transport *kafka.Transport
	Brokers   []string
	// Warnings are things about the connection the caller must show the
	// user (e.g. certificate verification turned off).
	Warnings []string
	dialer   *kafka.Dialer
}

// Connect builds the transport for src and checks that the cluster answers
// (Metadata). With SASL it first authenticates once through a kafka.Dialer,
// because the Transport path reports a wrong password only as "unexpected
// EOF" (kafka-go #799). Errors say what to fix and never hold the
// password; Cluster.Warnings lists insecure settings the caller must show.
func Connect(ctx context.Context, src plan.Source) (*Cluster, error) {
	tlsCfg, err := sinks.TLSConfig(src.TLS)
	if err != nil {
		return nil, err
	}
	mech, err := sinks.SASLMechanism(src.SASL)
	if err != nil {
		return nil, err
	}
	var brokers []string
	for _, b := range src.Brokers {
		for _, one := range strings.Split(b, ",") {
			brokers = append(brokers, strings.TrimSpace(one))
		}
	}
	tr := &kafka.Transport{
		DialTimeout:    10 * time.Second,
		IdleTimeout:    time.Minute,
		MetadataTTL:    10 * time.Second,
		MetadataTopics: []string{src.Topic},
		ClientID:       src.ClientID,
		TLS:            tlsCfg,
		SASL:           mech,
	}
	c := &Cluster{
		Client:    &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 30 * time.Second},
		Transport: tr,
		Brokers:   brokers,
		dialer:    &kafka.Dialer{Timeout: 10 * time.Second, ClientID: src.ClientID, TLS: tlsCfg, SASLMechanism: mech},
	}
	if tlsCfg != nil && tlsCfg.InsecureSkipVerify {
		c.Warnings = append(c.Warnings, "source.tls.insecure_skip_verify is on: the broker's certificate is not verified, so anyone on the network path can impersonate it and read the records and the SASL credentials; set source.tls.ca_file instead")
	}
	if src.SASL.Mechanism == "PLAIN" && tlsCfg == nil {
		c.Warnings = append(c.Warnings, "SASL PLAIN without TLS sends the password in clear text: enable source.tls")
	}
	if err := c.probe(ctx, src); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ProbeTimeout bounds the first exchange with the cluster (Connect).
var ProbeTimeout = 15 * time.Second

// probe fails early with a message a person can act on. With SASL or TLS
// it dials every bootstrap broker in turn through the Dialer until one
// answers: authentication and certificate problems end the probe at once,
// unreachable brokers let it try the next.
func (c *Cluster) probe(ctx context.Context, src plan.Source) error {
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	start := time.Now()
	explain := func(addr string, err error) error { return connectError(addr, src, err, time.Since(start)) }
	usable, skipped, err := sinks.ProbeBrokers(pctx, c.dialer, c.Brokers, "source.brokers", explain)
	if err != nil {
		return err
	}
	for _, e := range skipped {
		c.Warnings = append(c.Warnings, fmt.Sprintf("bootstrap broker left out of this run, another one answered: %v", e))
	}
	c.Brokers = usable
	c.Client.Addr = c.addr()
	if _, err := c.Client.Metadata(pctx, &kafka.MetadataRequest{Topics: []string{src.Topic}}); err != nil {
		return connectError(strings.Join(c.Brokers, ","), src, err, time.Since(start))
	}
	return nil
}

// connectError explains a failure to connect to addr. kafka-go reports a
// broker that hangs up on a client speaking the wrong protocol (no SASL, no
// TLS) only as EOF, so the message says what the plan may be missing. It
// never includes the password. waited is how long the probe waited.
func connectError(addr string, src plan.Source, err error, waited time.Duration) error {
	var (
		op      *net.OpError
		verify  *tls.CertificateVerificationError
		header  tls.RecordHeaderError
		missing []string
	)
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return fmt.Errorf("connect to %s: SASL authentication failed for user %q (mechanism %s): check source.sasl username and password", addr, src.SASL.Username, src.SASL.Mechanism)
	case errors.As(err, &verify):
		return fmt.Errorf("connect to %s: TLS: the broker's certificate is not trusted: %w (check source.tls.ca_file and server_name)", addr, err)
	case errors.As(err, &header):
		return fmt.Errorf("connect to %s: TLS handshake failed, the broker does not seem to speak TLS on this port (check the port and source.tls): %w", addr, err)
	case errors.As(err, &op) && op.Op == "remote error" && strings.Contains(op.Err.Error(), "certificate"):
		return fmt.Errorf("connect to %s: TLS: the broker refused the client certificate or requires one: %w (check source.tls.cert_file and key_file)", addr, err)
	case errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("connect to %s: TLS: the broker refused the connection: %w (check source.tls)", addr, err)
	case src.TLS.Enabled && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &op):
		// TCP connected (a dial timeout is a *net.OpError) but the handshake
		// never finished: a plain-text listener waits for a request forever.
		return fmt.Errorf("connect to %s: TLS: the broker did not complete the handshake in time (%w): is this port a TLS listener? check the port and source.tls", addr, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("connect to %s: the broker is not reachable: %w (is the address right and the broker up?)", addr, err)
	case errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &op) || errors.As(err, &op) && op.Op == "read" && op.Timeout():
		// TCP connected, but nothing answered in Kafka's protocol: another
		// server waits for a request in its own (PostgreSQL), or answers
		// in it and hangs up, which kafka-go retries until the deadline.
		return fmt.Errorf("no Kafka answer from %s within %s: is it a Kafka broker port (not, e.g., PostgreSQL or Redis)?", addr, waited.Round(time.Second))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if src.SASL.Mechanism == "" {
			missing = append(missing, "SASL authentication (source.sasl)")
		}
		if !src.TLS.Enabled {
			missing = append(missing, "TLS (source.tls)")
		}
		if len(missing) > 0 {
			return fmt.Errorf("connect to %s: the broker closed the connection (%w): the cluster may require %s", addr, err, strings.Join(missing, " or "))
		}
		return fmt.Errorf("connect to %s: the broker closed the connection (%w): check source.sasl and source.tls against the listener's settings", addr, err)
	}
	return fmt.Errorf("connect to %s: %w (is the broker address right and reachable?)", addr, err)
}

// Close releases idle connections.
func (c *Cluster) Close() {
	c.Transport.CloseIdleConnections()
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
// one of fetchConns transports configured like c.Transport (TLS, SASL),
// each with its own connections, so responses decode in parallel.
func (c *Cluster) fetchTransport(partition int32) *kafka.Transport {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if c.fetchers == nil {
		c.fetchers = make([]*kafka.Transport, max(fetchConns, 1))
	}
	i := int(partition) % len(c.fetchers)
	if c.fetchers[i] == nil {
		t := c.Transport
		c.fetchers[i] = &kafka.Transport{DialTimeout: t.DialTimeout, IdleTimeout: t.IdleTimeout, MetadataTTL: t.MetadataTTL,
			MetadataTopics: t.MetadataTopics, ClientID: t.ClientID, TLS: t.TLS, SASL: t.SASL}
	}
	return c.fetchers[i]
}

// addr is the bootstrap address handed to Transport.RoundTrip; the
// transport routes each request to the partition leader or the group
// coordinator itself.
func (c *Cluster) addr() net.Addr { return kafka.TCP(c.Brokers...) }
