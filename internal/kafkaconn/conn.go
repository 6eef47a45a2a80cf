// Package kafkaconn reaches a Kafka cluster as a plan describes it: the
// kafka-go transport and dialer, TLS and SASL, the bootstrap probe, and one
// classifier that turns a connection failure into a message naming the plan
// setting to check. Both the source cluster (runner) and the kafka sink's
// target cluster connect through it.
package kafkaconn

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/replay-tool/replay/internal/tlsfiles"
	"github.com/replay-tool/replay/plan"
)

// Settings is what a plan says about one cluster.
type Settings struct {
	// Section is the plan section the settings come from ("source" or
	// "sink"): error messages and warnings name its fields.
	Section string
	// Brokers are the bootstrap addresses, host:port each (see plan.BrokerList).
	Brokers []string
	TLS     plan.TLS
	SASL    plan.SASL
	// ClientID is sent with every request; "replay" when empty.
	ClientID string
	// MetadataTopics limits the transport's metadata requests to these
	// topics (all topics when empty).
	MetadataTopics []string
}

// Conn is a configured, not yet probed, way to one cluster.
type Conn struct {
	Settings
	// Transport carries requests (connection pool, metadata cache).
	Transport *kafka.Transport
	// Dialer opens single connections: the probe authenticates through it,
	// because the Transport path reports a wrong password only as
	// "unexpected EOF".
	Dialer *kafka.Dialer
	// Warnings are insecure settings the caller must show the user.
	Warnings []string
	// probed is set once Probe succeeded: the brokers took these
	// settings, so a closed connection afterwards is no settings mistake.
	probed bool
}

// Timeouts of every connection; a request's own timeout is the caller's.
const (
	dialTimeout = 10 * time.Second
	idleTimeout = time.Minute
	metadataTTL = 10 * time.Second
)

// New builds the transport and dialer for s. It fails on a CA, certificate
// or key file that cannot be read, and on an unknown SASL mechanism.
func New(s Settings) (*Conn, error) {
	s.ClientID = cmp.Or(s.ClientID, "replay")
	tlsCfg, err := TLSConfig(s.TLS)
	if err != nil {
		return nil, err
	}
	mech, err := SASLMechanism(s.SASL)
	if err != nil {
		return nil, err
	}
	c := &Conn{Settings: s, Dialer: &kafka.Dialer{Timeout: dialTimeout, ClientID: s.ClientID, TLS: tlsCfg, SASLMechanism: mech}}
	c.Transport = c.NewTransport()
	if tlsCfg != nil && tlsCfg.InsecureSkipVerify {
		c.Warnings = append(c.Warnings, s.Section+".tls.insecure_skip_verify is on: the broker's certificate is not verified, so anyone on the network path can impersonate it and read the records and the SASL credentials; set "+s.Section+".tls.ca_file instead")
	}
	return c, nil
}

// NewTransport returns another transport configured as c.Transport (TLS,
// SASL, timeouts) with connections of its own.
func (c *Conn) NewTransport() *kafka.Transport {
	return &kafka.Transport{DialTimeout: dialTimeout, IdleTimeout: idleTimeout, MetadataTTL: metadataTTL,
		MetadataTopics: c.MetadataTopics, ClientID: c.ClientID, TLS: c.Dialer.TLS, SASL: c.Dialer.SASLMechanism}
}

// Addr is the bootstrap address of c's brokers for kafka-go requests; the
// transport routes each request to the partition leader or the group
// coordinator itself.
func (c *Conn) Addr() net.Addr { return kafka.TCP(c.Brokers...) }

// TLSConfig builds the client TLS configuration for a plan's tls section
// (nil when TLS is disabled): TLS 1.2 or later, the CA file as the only
// trusted roots when given, and the client certificate for mTLS (see
// tlsfiles.Config for the files it refuses).
func TLSConfig(t plan.TLS) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg, err := tlsfiles.Config(t.CAFile, t.CertFile, t.KeyFile, time.Now())
	if err != nil {
		return nil, fmt.Errorf("tls %w", err)
	}
	cfg.ServerName, cfg.InsecureSkipVerify = t.ServerName, t.InsecureSkipVerify
	return cfg, nil
}

// SASLMechanism returns the kafka-go SASL mechanism for a plan's sasl
// section (nil when none): PLAIN (KIP-43) or SCRAM-SHA-256/512 (KIP-84).
func SASLMechanism(s plan.SASL) (sasl.Mechanism, error) {
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
