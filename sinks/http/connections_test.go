package http_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// shardServer records what each request held and checks, while requests
// overlap, that no key is in two requests in flight at once.
type shardServer struct {
	mu        sync.Mutex
	inFlight  map[string]int // key → requests in flight holding it
	concurent int
	maxConc   int
	offsets   map[string][]int64 // key → offsets in arrival order
	overlap   []string           // keys seen in two requests at once
	refuse    string             // a key whose requests get a 500
}

func (s *shardServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var recs []struct {
		Key    string `json:"idempotency_key"`
		Offset int64  `json:"offset"`
	}
	if err := json.Unmarshal(body, &recs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.concurent++
	s.maxConc = max(s.maxConc, s.concurent)
	refused := false
	for _, rec := range recs {
		if s.inFlight[rec.Key] > 0 {
			s.overlap = append(s.overlap, rec.Key)
		}
		refused = refused || rec.Key == s.refuse
	}
	for _, rec := range recs {
		s.inFlight[rec.Key]++
	}
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // on synctest's clock: every shard's request in flight is here at once
	s.mu.Lock()
	s.concurent--
	for _, rec := range recs {
		s.inFlight[rec.Key]--
		if !refused {
			s.offsets[rec.Key] = append(s.offsets[rec.Key], rec.Offset)
		}
	}
	s.mu.Unlock()
	if refused {
		http.Error(w, "refused", http.StatusInternalServerError)
	}
}

// inProcess is a transport that has the handler answer each request in
// the caller's goroutine.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// connections: 4 posts a Write's records in up to 4 requests at once,
// each key's records in one stream, in offset order; Write returns only
// when every shard's requests succeeded.
// The requests go to the server in process, on synctest's clock: the
// server holds each one 20 ms, during which the other shards' requests
// arrive: all of them are in flight at once.
func TestHTTPConnectionsShardByKey(t *testing.T) {
	synctest.Test(t, testHTTPConnectionsShardByKey)
}

func testHTTPConnectionsShardByKey(t *testing.T) {
	ss := &shardServer{inFlight: map[string]int{}, offsets: map[string][]int64{}}
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := httpsink.New(httpsink.Config{URL: "http://shards.test/", BatchSize: 10, Connections: 4, Log: zerolog.New(zerolog.NewTestWriter(t)),
		Client: &http.Client{Transport: inProcess{ss}}})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	s := sinktest.Keyed(hs, keyer)
	var batch []record.Record
	for i := range 200 {
		batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprintf("k%d", i%23), `{}`))
	}
	sinktest.MustWrite(t, s, batch...)
	if ss.maxConc < 2 {
		t.Errorf("at most %d requests in flight at once, want up to 4", ss.maxConc)
	}
	if len(ss.overlap) > 0 {
		t.Errorf("keys in two requests in flight at once: %v", ss.overlap)
	}
	n := 0
	for key, offs := range ss.offsets {
		n += len(offs)
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] {
				t.Errorf("key %s: offsets arrived as %v, want increasing", key, offs)
				break
			}
		}
	}
	if n != len(batch) {
		t.Errorf("%d records received, want %d", n, len(batch))
	}

	// A shard that fails fails the Write, once the others are done.
	ss.refuse = "k5"
	ss.offsets = map[string][]int64{}
	err = s.Write(t.Context(), batch)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("Write with a refused shard = %v, want the 500", err)
	}
	var te *sinks.TransientError
	if !errors.As(err, &te) {
		t.Errorf("error %v is not transient", err)
	}
	if got := len(ss.offsets); got == 0 || ss.concurent != 0 {
		t.Errorf("%d keys received and %d requests in flight when Write returned; want the other shards done", got, ss.concurent)
	}
}
