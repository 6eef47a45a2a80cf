package kafkaconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
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
	serveEach(ln, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 64))
		// What Apache Kafka's SSL listener sends: a fatal alert, unexpected_message.
		_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a})
	})
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

// A broker that requires a client certificate refuses a client without
// one after the TLS 1.3 handshake, which the client saw succeed: the
// probe reads an answer, so the refusal is reported at once, not after
// the Metadata requests' 15 s.
func TestProbeSeesAClientCertificateRefusedAfterTheHandshake(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serveEach(ln, func(c net.Conn) { _ = c.(*tls.Conn).Handshake() })
	c, err := New(Settings{Section: "source", Brokers: []string{ln.Addr().String()}, TLS: plan.TLS{Enabled: true, CAFile: ca}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Probe(context.Background(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "the broker refused the client certificate") || !strings.Contains(err.Error(), "check source.tls.cert_file") {
		t.Errorf("probe without the client certificate the broker requires: %v", err)
	}
}

// serveEach hands every connection ln accepts to handle, then closes it,
// until ln is closed.
func serveEach(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
}
