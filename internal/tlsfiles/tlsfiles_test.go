package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed client certificate valid from notBefore
// to notAfter, and its key, into dir.
func writeCert(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replay"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// An expired client certificate is refused before any connection, saying
// so, instead of by the server after the handshake with "unknown
// certificate" (or a Metadata request unanswered for 15 s).
func TestConfigRefusesAnExpiredClientCertificate(t *testing.T) {
	now := time.Now()
	c, k := writeCert(t, t.TempDir(), now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	_, err := Config("", c, k, now)
	if err == nil || !strings.Contains(err.Error(), "cert_file "+c+" is valid from") || !strings.Contains(err.Error(), "renew the certificate") {
		t.Errorf("expired certificate: %v", err)
	}
	c, k = writeCert(t, t.TempDir(), now.Add(-time.Hour), now.Add(time.Hour))
	if cfg, err := Config("", c, k, now); err != nil || len(cfg.Certificates) != 1 {
		t.Errorf("valid certificate: %v", err)
	}
}

// A key file encrypted with a passphrase is refused saying so and how to
// decrypt it, instead of "tls: failed to parse private key".
func TestConfigNamesAnEncryptedKey(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	c, _ := writeCert(t, dir, now.Add(-time.Hour), now.Add(time.Hour))
	for _, block := range []*pem.Block{
		{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x00}},
		{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: []byte{1, 2, 3}},
	} {
		k := filepath.Join(dir, "enc.pem")
		if err := os.WriteFile(k, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Config("", c, k, now)
		if err == nil || !strings.Contains(err.Error(), "key_file "+k+" is encrypted with a passphrase") {
			t.Errorf("%s key: %v", block.Type, err)
		}
	}
}
