package registry

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The registry's TLS files are checked as the Kafka clients' are: a key
// encrypted with a passphrase is refused saying so, under the registry's
// name, instead of "tls: failed to parse private key".
func TestTLSFilesRefusedSayingWhy(t *testing.T) {
	k := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(k, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x00}}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{URLs: []string{"https://registry.example:8081"}, CertFile: k, KeyFile: k}, Options{})
	if err == nil || !strings.Contains(err.Error(), "schema registry tls key_file "+k+" is encrypted with a passphrase") {
		t.Errorf("an encrypted key: %v", err)
	}
}
