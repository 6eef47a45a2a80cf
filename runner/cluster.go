// Package runner resolves a plan's window to fixed per-partition offset
// ranges, reads exactly those ranges, hands the records to a sink and
// checkpoints progress in the plan's dedicated replay consumer group.
package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/replay-tool/replay/plan"
)

// Cluster is a connection to the source Kafka cluster: one kafka-go
// Transport (connection pool, metadata cache, TLS and SASL) shared by the
// Client used for ListOffsets, commits and group checks and by the
// protocol-level fetches of the window read.
type Cluster struct {
	Client    *kafka.Client
	Transport *kafka.Transport
	Brokers   []string
	dialer    *kafka.Dialer
}

// Connect builds the transport for src and checks that the cluster answers
// (Metadata). With SASL it first authenticates once through a kafka.Dialer,
// because the Transport path reports a wrong password only as "unexpected
// EOF" (kafka-go #799).
func Connect(ctx context.Context, src plan.Source) (*Cluster, error) {
	tlsCfg, err := tlsConfig(src.TLS)
	if err != nil {
		return nil, err
	}
	mech, err := saslMechanism(src.SASL)
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
	if err := c.probe(ctx, src); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// probe fails early with a message a person can act on.
func (c *Cluster) probe(ctx context.Context, src plan.Source) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if c.dialer.SASLMechanism != nil || c.dialer.TLS != nil {
		conn, err := c.dialer.DialContext(pctx, "tcp", c.Brokers[0])
		if err != nil {
			switch {
			case errors.Is(err, kafka.SASLAuthenticationFailed):
				return fmt.Errorf("connect to %s: SASL authentication failed for user %q (mechanism %s): check the username and password", c.Brokers[0], src.SASL.Username, src.SASL.Mechanism)
			default:
				return fmt.Errorf("connect to %s: %w", c.Brokers[0], err)
			}
		}
		conn.Close()
	}
	if _, err := c.Client.Metadata(pctx, &kafka.MetadataRequest{Topics: []string{src.Topic}}); err != nil {
		return fmt.Errorf("connect to %s: %w (is the broker address right and reachable?)", strings.Join(c.Brokers, ","), err)
	}
	return nil
}

// Close releases idle connections.
func (c *Cluster) Close() {
	c.Transport.CloseIdleConnections()
}

func tlsConfig(t plan.TLS) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca_file %s: no PEM certificate found", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func saslMechanism(s plan.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case "SCRAM-SHA-256":
		return scram.Mechanism(scram.SHA256, s.Username, s.Password)
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, s.Username, s.Password)
	}
	return nil, fmt.Errorf("sasl mechanism %q is not supported", s.Mechanism)
}

// addr is the bootstrap address handed to Transport.RoundTrip; the
// transport routes each request to the partition leader or the group
// coordinator itself.
func (c *Cluster) addr() net.Addr { return kafka.TCP(c.Brokers...) }
