package kafkaconn

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A plan without TLS against a TLS listener (SSL or SASL_SSL): the broker
// answers the plain-text probe with a TLS alert, and the message says to
// enable TLS, not that the port is another server.
func TestProbeOfATLSListenerSaysToEnableTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			_, _ = c.Read(buf)
			// What Apache Kafka's SSL listener sends: a fatal alert, unexpected_message.
			_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a})
			c.Close()
		}
	}()
	c, err := New(Settings{Section: "source", Brokers: []string{ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Probe(context.Background(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "is a TLS listener") || !strings.Contains(err.Error(), "set source.tls.enabled: true") ||
		strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("probe of a TLS listener without TLS: %v", err)
	}
}
