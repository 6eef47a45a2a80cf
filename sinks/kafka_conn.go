package sinks

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/replay-tool/replay/plan"
)

// kafkaConn holds what the kafka sink needs to reach its cluster. It
// mirrors runner/cluster.go (sinks do not import the runner): the same
// plan settings give the same TLS configuration and SASL mechanism.
type kafkaConn struct {
	transport *kafka.Transport
	dialer    *kafka.Dialer
	sasl      plan.SASL
	tls       bool
	// warnings are insecure settings the user must hear about.
	warnings []string
}

func newKafkaConn(t plan.TLS, s plan.SASL, clientID string) (*kafkaConn, error) {
	tlsCfg, err := TLSConfig(t)
	if err != nil {
		return nil, err
	}
	mech, err := SASLMechanism(s)
	if err != nil {
		return nil, err
	}
	if clientID == "" {
		clientID = "replay"
	}
	c := &kafkaConn{
		transport: &kafka.Transport{DialTimeout: 10 * time.Second, IdleTimeout: time.Minute, MetadataTTL: 10 * time.Second,
			ClientID: clientID, TLS: tlsCfg, SASL: mech},
		dialer: &kafka.Dialer{Timeout: 10 * time.Second, ClientID: clientID, TLS: tlsCfg, SASLMechanism: mech},
		sasl:   s,
		tls:    tlsCfg != nil,
	}
	if tlsCfg != nil && tlsCfg.InsecureSkipVerify {
		c.warnings = append(c.warnings, "sink.tls.insecure_skip_verify is on: the broker's certificate is not verified, so anyone on the network path can impersonate it and read the records and the SASL credentials; set sink.tls.ca_file instead")
	}
	if s.Mechanism == "PLAIN" && tlsCfg == nil {
		c.warnings = append(c.warnings, "SASL PLAIN without TLS sends the password in clear text: enable sink.tls")
	}
	return c, nil
}

// TLSConfig builds the client TLS configuration for a plan's tls section
// (nil when TLS is disabled): TLS 1.2 or later, the CA file as the only
// trusted roots when given, and the client certificate for mTLS. Used for
// the source cluster (runner) and the kafka sink's target cluster.
func TLSConfig(t plan.TLS) (*tls.Config, error) {
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

// connectError explains a failure to connect to addr without the password.
func (c *kafkaConn) connectError(addr string, err error) error {
	var (
		op     *net.OpError
		verify *tls.CertificateVerificationError
		header tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return fmt.Errorf("connect to %s: SASL authentication failed for user %q (mechanism %s): check sink.sasl username and password", addr, c.sasl.Username, c.sasl.Mechanism)
	case errors.As(err, &verify):
		return fmt.Errorf("connect to %s: TLS: the broker's certificate is not trusted: %w (check sink.tls.ca_file and server_name)", addr, err)
	case errors.As(err, &header):
		return fmt.Errorf("connect to %s: TLS handshake failed, the broker does not seem to speak TLS on this port (check the port and sink.tls): %w", addr, err)
	case errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("connect to %s: TLS: the broker refused the connection: %w (check sink.tls)", addr, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("connect to %s: the broker is not reachable: %w (is the address right and the broker up?)", addr, err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("connect to %s: the broker closed the connection (%w): check sink.sasl and sink.tls against the listener's settings", addr, err)
	}
	return fmt.Errorf("connect to %s: %w", addr, err)
}
