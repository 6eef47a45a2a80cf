package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/replay-tool/replay/plan"
)

// One classifier serves the source and the sink: each message names the
// section of the plan to check, and none holds the password.
func TestExplainNamesTheSection(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		s    Settings
		err  error
		want string
	}{
		{"sasl refused, source", Settings{Section: "source", SASL: plan.SASL{Mechanism: "PLAIN", Username: "alice", Password: "s3cret"}},
			kafka.SASLAuthenticationFailed, `SASL authentication failed for user "alice" (mechanism PLAIN): check source.sasl username and password`},
		{"sasl refused, sink", Settings{Section: "sink", SASL: plan.SASL{Mechanism: "SCRAM-SHA-512", Username: "bob", Password: "s3cret"}},
			fmt.Errorf("auth: %w", kafka.SASLAuthenticationFailed), "check sink.sasl username and password"},
		{"sasl on a listener without it", Settings{Section: "source", SASL: plan.SASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: "s3cret"}},
			fmt.Errorf("could not successfully authenticate to k:9092 with SASL: SASL handshake failed: %w", kafka.IllegalSASLState),
			"the broker takes no SASL authentication on this port (a listener without SASL, such as SSL with client certificates): remove source.sasl"},
		{"mechanism not enabled", Settings{Section: "sink", SASL: plan.SASL{Mechanism: "SCRAM-SHA-256", Username: "u", Password: "s3cret"}},
			fmt.Errorf("SASL handshake failed: %w", kafka.UnsupportedSASLMechanism), "does not enable SASL mechanism SCRAM-SHA-256: check sink.sasl.mechanism"},
		{"unreachable", Settings{Section: "sink"}, dial, "the broker is not reachable"},
		{"hang-up without sasl or tls", Settings{Section: "source"}, io.EOF,
			"the cluster may require SASL authentication (source.sasl) or TLS (source.tls)"},
		{"hang-up with both", Settings{Section: "sink", TLS: plan.TLS{Enabled: true}, SASL: plan.SASL{Mechanism: "PLAIN", Password: "s3cret"}},
			io.ErrUnexpectedEOF, "check sink.sasl and sink.tls against the listener's settings"},
		{"silent port", Settings{Section: "source"}, context.DeadlineExceeded, "no Kafka answer from k:9092 within 3s"},
		{"tls handshake stuck", Settings{Section: "sink", TLS: plan.TLS{Enabled: true}}, context.DeadlineExceeded,
			"did not complete the handshake in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{Settings: tc.s}
			got := c.Explain("k:9092", tc.err, 3*time.Second).Error()
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Errorf("the message holds the password: %q", got)
			}
		})
	}
}

// A connection warns of an unverified broker certificate; SASL PLAIN
// without TLS is the plan's validation's to warn of, once.
func TestNewWarnsAboutInsecureSettings(t *testing.T) {
	c, err := New(Settings{Section: "sink", Brokers: []string{"k:9092"}, SASL: plan.SASL{Mechanism: "PLAIN", Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings %q, want none: the plan warns of PLAIN without TLS", c.Warnings)
	}
	c, err = New(Settings{Section: "sink", Brokers: []string{"k:9092"}, TLS: plan.TLS{Enabled: true, InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "sink.tls.insecure_skip_verify is on") {
		t.Errorf("warnings %q, want one saying sink.tls.insecure_skip_verify is on", c.Warnings)
	}
	if c.ClientID != "replay" || c.Transport.ClientID != "replay" {
		t.Errorf("client id %q/%q, want the default replay", c.ClientID, c.Transport.ClientID)
	}
	if _, err := New(Settings{Section: "source", SASL: plan.SASL{Mechanism: "GSSAPI"}}); err == nil {
		t.Error("an unknown SASL mechanism must be refused")
	}
}

// A connection closed after the probe succeeded is a dropped connection,
// not a settings mistake, once the probe authenticated; without SASL the
// message names both what it may be.
func TestExplainDropAfterProbe(t *testing.T) {
	c := &Conn{Settings: Settings{Section: "source", SASL: plan.SASL{Mechanism: "PLAIN", Username: "u", Password: "s3cret"}}, probed: true}
	got := c.Explain("k:9092", io.ErrUnexpectedEOF, time.Second).Error()
	if !strings.Contains(got, "the connection dropped") || strings.Contains(got, "check source.sasl") || strings.Contains(got, "s3cret") {
		t.Errorf("authenticated probe: %s", got)
	}
	c = &Conn{Settings: Settings{Section: "source"}, probed: true}
	got = c.Explain("k:9092", io.EOF, time.Second).Error()
	if !strings.Contains(got, "may require SASL authentication (source.sasl), or the connection dropped") || strings.Contains(got, "TLS") {
		t.Errorf("probe without SASL: %s", got)
	}
}
