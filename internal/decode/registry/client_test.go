package registry

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// With a list of URLs, a request starts at the URL that answered last: a
// failing first URL is tried once in a run, not once per request.
func TestFailoverKeepsToTheURLThatAnswered(t *testing.T) {
	var down, up atomic.Int32
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		down.Add(1)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer dead.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"schema":"\"string\""}`)
	}))
	defer live.Close()
	c, err := New(Config{URLs: []string{dead.URL, live.URL}}, Options{RetryBudget: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for id := range int32(3) {
		if _, err := c.SchemaByID(t.Context(), id+1); err != nil {
			t.Fatal(err)
		}
	}
	if down.Load() != 1 || up.Load() != 3 {
		t.Errorf("the failing URL got %d requests, the live one %d: want 1 and 3", down.Load(), up.Load())
	}
}
