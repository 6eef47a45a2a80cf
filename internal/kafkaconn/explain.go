package kafkaconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// Probe checks the bootstrap brokers in turn, within timeout, until one
// answers: on plain TCP, ProbeKafka first; then a connection through
// c.Dialer (the TLS handshake and SASL authentication, when configured).
// A port that answers another protocol (*NotKafkaError), refused
// credentials or a certificate end the probe at once; a broker that is
// unreachable, silent or hangs up lets it try the next. The errors of
// every broker tried are explained (Explain) and joined; they never hold
// the password.
//
// c.Brokers keeps the broker that answered and those after it, not tried:
// kafka-go would use any bootstrap address that accepts a TCP connection,
// so the ones that failed are left out, each with a warning.
func (c *Conn) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var errs []error
	for i, b := range c.Brokers {
		var err error
		if c.Dialer.TLS == nil {
			var nk *NotKafkaError
			if err = ProbeKafka(ctx, b, c.Dialer.ClientID); errors.As(err, &nk) && nk.TLS() {
				return fmt.Errorf("%w: set %s.tls.enabled: true (with its ca_file), or use the cluster's plain-text port", err, c.Section)
			} else if nk != nil {
				return fmt.Errorf("%w: check %s", err, c.Section+".brokers")
			}
		}
		if err == nil {
			var conn *kafka.Conn
			if conn, err = c.Dialer.DialContext(ctx, "tcp", b); err == nil {
				if c.Dialer.TLS != nil {
					// Under TLS 1.3 a broker refuses the client certificate
					// after the handshake: its alert comes with the first answer.
					if dl, ok := ctx.Deadline(); ok {
						_ = conn.SetDeadline(dl)
					}
					_, err = conn.ApiVersions()
				}
				conn.Close()
			}
			if err == nil {
				for _, e := range errs {
					c.Warnings = append(c.Warnings, fmt.Sprintf("bootstrap broker left out of this run, another one answered: %v", e))
				}
				c.probed, c.Brokers = true, c.Brokers[i:]
				return nil
			}
		}
		errs = append(errs, c.Explain(b, err, time.Since(start)))
		if ctx.Err() != nil || !brokerMayBeOthers(err) {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.probed, c.Brokers = true, nil // no broker to probe
	return nil
}

// Explain turns a failure to connect to addr into a message that says what
// to check in the plan's section (c.Section). kafka-go reports a broker
// that hangs up on a client speaking the wrong protocol (no SASL, no TLS)
// only as EOF, so the message says what the plan may be missing. It never
// includes the password. waited is how long the caller waited.
func (c *Conn) Explain(addr string, err error, waited time.Duration) error {
	var (
		op     *net.OpError
		verify *tls.CertificateVerificationError
		header tls.RecordHeaderError
		sec    = c.Section
	)
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return fmt.Errorf("connect to %s: SASL authentication failed for user %q (mechanism %s): check %s.sasl username and password", addr, c.SASL.Username, c.SASL.Mechanism, sec)
	case errors.Is(err, kafka.IllegalSASLState):
		return fmt.Errorf("connect to %s: the broker takes no SASL authentication on this port (a listener without SASL, such as SSL with client certificates): remove %s.sasl, or use the cluster's SASL port", addr, sec)
	case errors.Is(err, kafka.UnsupportedSASLMechanism):
		return fmt.Errorf("connect to %s: the listener does not enable SASL mechanism %s: check %s.sasl.mechanism against the listener's sasl.enabled.mechanisms", addr, c.SASL.Mechanism, sec)
	case errors.As(err, &verify):
		return fmt.Errorf("connect to %s: TLS: the broker's certificate is not trusted: %w (check %s.tls.ca_file and server_name)", addr, err, sec)
	case errors.As(err, &header):
		return fmt.Errorf("connect to %s: TLS handshake failed, the broker does not seem to speak TLS on this port (check the port and %s.tls): %w", addr, sec, err)
	case errors.As(err, &op) && op.Op == "remote error" && strings.Contains(op.Err.Error(), "certificate"):
		return fmt.Errorf("connect to %s: TLS: the broker refused the client certificate or requires one: %w (check %s.tls.cert_file and key_file)", addr, err, sec)
	case errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("connect to %s: TLS: the broker refused the connection: %w (check %s.tls)", addr, err, sec)
	case c.TLS.Enabled && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &op):
		// TCP connected (a dial timeout is a *net.OpError) but the handshake
		// never finished: a plain-text listener waits for a request forever.
		return fmt.Errorf("connect to %s: TLS: the broker did not complete the handshake in time (%w): is this port a TLS listener? check the port and %s.tls", addr, err, sec)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("connect to %s: the broker is not reachable: %w (is the address right and the broker up?)", addr, err)
	case errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &op) || errors.As(err, &op) && op.Op == "read" && op.Timeout():
		// TCP connected, but nothing answered in Kafka's protocol: another
		// server waits for a request in its own (PostgreSQL), or answers
		// in it and hangs up, which kafka-go retries until the deadline.
		return fmt.Errorf("no Kafka answer from %s within %s: is it a Kafka broker port (not, e.g., PostgreSQL or Redis)?", addr, waited.Round(time.Second))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return c.explainEOF(addr, err)
	}
	return fmt.Errorf("connect to %s: %w (is the broker address right and reachable?)", addr, err)
}

// explainEOF explains a broker that closed the connection: the settings
// the plan lacks, or the ones to compare with the listener's.
func (c *Conn) explainEOF(addr string, err error) error {
	if c.probed && c.SASL.Mechanism != "" {
		// The probe authenticated with these settings: the connection
		// dropped.
		return fmt.Errorf("connect to %s: the broker closed the connection after it had accepted this client's settings (%w): the connection dropped (a broker restart or a network failure); try again when the cluster is healthy", addr, err)
	}
	if c.probed && c.SASL.Mechanism == "" {
		// The probe spoke Kafka, but a broker answers it before
		// authentication: a missing SASL section looks the same as a drop.
		return fmt.Errorf("connect to %s: the broker answered, then closed the connection (%w): the cluster may require SASL authentication (%s.sasl), or the connection dropped (a broker restart or a network failure)", addr, err, c.Section)
	}
	var missing []string
	if c.SASL.Mechanism == "" {
		missing = append(missing, "SASL authentication ("+c.Section+".sasl)")
	}
	if !c.TLS.Enabled {
		missing = append(missing, "TLS ("+c.Section+".tls)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("connect to %s: the broker closed the connection (%w): the cluster may require %s", addr, err, strings.Join(missing, " or "))
	}
	return fmt.Errorf("connect to %s: the broker closed the connection (%w): check %s.sasl and %s.tls against the listener's settings", addr, err, c.Section, c.Section)
}
