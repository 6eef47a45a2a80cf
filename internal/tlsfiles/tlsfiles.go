// Package tlsfiles builds client TLS configurations from PEM files, for
// the Kafka clients and the Schema Registry client alike, refusing files a
// server would refuse with an error that says what is wrong and how to fix
// it.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"time"
)

// Config returns a client configuration of TLS 1.2 or later that trusts
// the certificates of caFile (the system's roots when it is empty) and,
// when certFile or keyFile is given, presents their certificate (mutual
// TLS). A key encrypted with a passphrase and a certificate outside its
// validity at now are refused. Errors start with the field at fault:
// "ca_file", "key_file", "cert_file" or "cert_file/key_file".
func Config(caFile, certFile, keyFile string, now time.Time) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate found", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile == "" && keyFile == "" {
		return cfg, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		if encryptedKey(keyFile) {
			return nil, fmt.Errorf("key_file %s is encrypted with a passphrase, which replay cannot read: give it the key decrypted (openssl pkey -in %s -out key.pem)", keyFile, keyFile)
		}
		return nil, fmt.Errorf("cert_file/key_file: %w", err)
	}
	if l := cert.Leaf; l != nil && (now.After(l.NotAfter) || now.Before(l.NotBefore)) {
		return nil, fmt.Errorf("cert_file %s is valid from %s to %s, not now: a server refuses it; renew the certificate",
			certFile, l.NotBefore.UTC().Format(time.RFC3339), l.NotAfter.UTC().Format(time.RFC3339))
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

// encryptedKey reports whether the first PEM block of the file is a
// private key encrypted with a passphrase (PKCS #8, or OpenSSL's legacy
// Proc-Type header).
func encryptedKey(file string) bool {
	data, _ := os.ReadFile(file)
	b, _ := pem.Decode(data)
	return b != nil && (b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED"))
}
