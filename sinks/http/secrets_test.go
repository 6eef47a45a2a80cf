package http_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replay-tool/replay/sinks/sinktest"

	"github.com/replay-tool/replay/internal/record"
	httpsink "github.com/replay-tool/replay/sinks/http"
)

// Regression: an endpoint that quotes the credentials it refused in its
// answer ({"error": "invalid token Bearer <token>"}) put them in the
// error, the logs, the run report and the reasons of dead letters.
func TestHTTPResponseDoesNotEchoCredentials(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusBadRequest} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]any{"index": 0,
				"error": "invalid token " + r.Header.Get("Authorization") + ", key " + r.Header.Get("X-Api-Key") + ", query " + r.URL.RawQuery})
		}))
		t.Cleanup(srv.Close)
		s := newHTTP(t, httpsink.Config{URL: srv.URL + "/hook?token=Qs3cr3t-tok", MaxRetries: 0,
			Headers: map[string]string{"Authorization": "Bearer Hs3cr3t-tok", "X-Api-Key": "Ks3cr3t-key"}})
		err := s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", "{}")})
		var se *httpsink.StatusError
		if !errors.As(err, &se) || se.Status != code {
			t.Fatalf("Write = %v, want a %d", err, code)
		}
		if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "invalid token xxxxx") {
			t.Errorf("error %q: want the endpoint's answer without the credentials", err)
		}
	}
}
