package http_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// fault is what the test endpoint does with a request instead of (or
// after) storing it. It returns true when it answered the request.
type fault func(w http.ResponseWriter, store func()) bool

var (
	// storeThenReset stores the records and drops the connection before
	// answering: the write happened, the client cannot know.
	storeThenReset fault = func(w http.ResponseWriter, store func()) bool { store(); resetConn(w); return true }
	// reset drops the connection without storing.
	reset fault = func(w http.ResponseWriter, _ func()) bool { resetConn(w); return true }
)

func status(code int, retryAfter string) fault {
	return func(w http.ResponseWriter, _ func()) bool {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"injected %d"}`, code)
		return true
	}
}

// resetConn closes the connection with a TCP reset.
func resetConn(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// endpoint is an HTTP service that stores records by idempotency_key, the
// contract the http sink relies on. Its faults are applied in turn to the
// attempts of each request (by Idempotency-Key), then to nothing.
type endpoint struct {
	t      *testing.T
	srv    *httptest.Server
	faults []fault

	mu       sync.Mutex
	records  map[string]json.RawMessage
	requests int
	attempts map[string]int      // Idempotency-Key → attempts seen
	bodies   map[string][32]byte // Idempotency-Key → body hash
	headers  []http.Header
	times    []time.Time
}

func newEndpoint(t *testing.T, faults ...fault) *endpoint {
	e := &endpoint{t: t, faults: faults, records: map[string]json.RawMessage{}, attempts: map[string]int{}, bodies: map[string][32]byte{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client gave up
	}
	idem := r.Header.Get("Idempotency-Key")
	e.mu.Lock()
	e.requests++
	e.headers = append(e.headers, r.Header.Clone())
	e.times = append(e.times, time.Now())
	n := e.attempts[idem]
	e.attempts[idem]++
	if prev, seen := e.bodies[idem]; seen && prev != sha256.Sum256(body) {
		e.t.Errorf("Idempotency-Key %s reused for another body", idem)
	}
	e.bodies[idem] = sha256.Sum256(body)
	e.mu.Unlock()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || len(idem) != 64 {
		e.t.Errorf("request %s %s, Content-Type %q, Idempotency-Key %q", r.Method, r.URL, r.Header.Get("Content-Type"), idem)
	}
	var objs []map[string]json.RawMessage
	if err := json.Unmarshal(body, &objs); err != nil {
		e.t.Errorf("body is not a JSON array of objects: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var raws []json.RawMessage // each object as the sink wrote it
	_ = json.Unmarshal(body, &raws)
	store := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for i, o := range objs {
			var key string
			if err := json.Unmarshal(o["idempotency_key"], &key); err != nil || key == "" {
				e.t.Errorf("object without idempotency_key: %s", o["idempotency_key"])
			}
			e.records[key] = raws[i] // in request order: the last record of a key wins
		}
	}
	if n < len(e.faults) && e.faults[n](w, store) {
		return
	}
	store()
	fmt.Fprintf(w, `{"stored":%d}`, len(objs))
}

func (e *endpoint) stored() map[string]json.RawMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]json.RawMessage, len(e.records))
	for k, v := range e.records {
		out[k] = v
	}
	return out
}

func (e *endpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// httpHarness runs the conformance suite on the http sink: a target is an
// endpoint, whose faults make every request fail a few times first (after
// storing it, or not) when flaky.
type httpHarness struct {
	flaky     bool
	endpoints sinktest.Targets[*endpoint]
}

func (h *httpHarness) endpoint(t *testing.T) *endpoint {
	return h.endpoints.Get(t, func() *endpoint {
		if !h.flaky {
			return newEndpoint(t)
		}
		return newEndpoint(t, storeThenReset, status(503, ""), status(429, "0"), reset, status(500, ""))
	})
}

func (h *httpHarness) New(t *testing.T) sinks.Sink { return h.NewKeyed(t, nil) }

func (h *httpHarness) NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink {
	s, err := httpsink.New(httpsink.Config{URL: h.endpoint(t).srv.URL + "/records", BatchSize: 4, MaxRetries: 8,
		RetryWait: time.Millisecond, MaxRetryWait: 10 * time.Millisecond, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *httpHarness) Contents(t *testing.T) []string {
	var out []string
	for key, obj := range h.endpoint(t).stored() {
		s, err := sinktest.StoredLine(obj)
		if err != nil {
			t.Fatalf("record %s: %v", key, err)
		}
		out = append(out, s.String())
	}
	return out
}

func (h *httpHarness) Records(t *testing.T) []record.Record {
	var out []record.Record
	for key, obj := range h.endpoint(t).stored() {
		r, err := encode.DecodeJSONL(obj)
		if err != nil {
			t.Fatalf("record %s: %v", key, err)
		}
		out = append(out, r)
	}
	return out
}

func TestHTTPConformance(t *testing.T) {
	t.Run("reliable", func(t *testing.T) {
		sinktest.RunWith(t, &httpHarness{}, sinktest.Features{Durable: sinktest.OnWrite, Contents: true})
	})
	t.Run("flaky", func(t *testing.T) {
		sinktest.RunWith(t, &httpHarness{flaky: true}, sinktest.Features{Durable: sinktest.OnWrite})
	})
}

func newHTTP(t *testing.T, cfg httpsink.Config) *httpsink.Sink {
	t.Helper()
	s, _ := newHTTPLogged(t, cfg)
	return s
}

// newHTTPLogged is newHTTP with the sink's log kept, for loggedWaits.
func newHTTPLogged(t *testing.T, cfg httpsink.Config) (*httpsink.Sink, *testenv.Buffer) {
	t.Helper()
	log := new(testenv.Buffer)
	cfg.Log = zerolog.New(io.MultiWriter(log, zerolog.NewTestWriter(t)))
	if cfg.RetryWait == 0 {
		cfg.RetryWait = time.Millisecond
	}
	s, err := httpsink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, log
}

// loggedWaits are the waits between attempts the sink chose, as it logs
// them ("wait", in milliseconds): what a test checks of its backoff,
// whatever the load of the machine adds to the time they take.
func loggedWaits(log *testenv.Buffer) []time.Duration {
	var waits []time.Duration
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if ms := gjson.Get(line, "wait"); ms.Exists() {
			waits = append(waits, time.Duration(ms.Float()*float64(time.Millisecond)))
		}
	}
	return waits
}

func TestHTTPRequestForm(t *testing.T) {
	e := newEndpoint(t)
	keyer, _ := sinks.NewKeyer("order-{{ .Value.id }}")
	s := newKeyedHTTP(t, keyer, httpsink.Config{URL: e.srv.URL, BatchSize: 2,
		Headers: map[string]string{"Authorization": "Bearer t0ken", "X-Tenant": "shop"}})
	r1 := sinktest.Rec(0, 1, "k", `{"id":1}`)
	r1.Headers = []record.Header{{Key: "trace", Value: []byte("abc")}}
	batch := []record.Record{r1, sinktest.Rec(0, 2, "", `{"id":2}`), sinktest.Rec(0, 3, "", `{"id":1,"v":2}`)}
	sinktest.MustWrite(t, s, batch...)
	if e.count() != 2 {
		t.Fatalf("%d requests for 3 records at batch_size 2, want 2", e.count())
	}
	for _, h := range e.headers {
		if h.Get("Authorization") != "Bearer t0ken" || h.Get("X-Tenant") != "shop" || h.Get("User-Agent") != "replay" {
			t.Errorf("request headers %v", h)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(e.stored()["order-1"], &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"idempotency_key": "order-1", "topic": "orders", "partition": 0.0, "offset": 3.0,
		"timestamp": "2026-11-03T10:00:00.003Z", "timestamp_type": "CreateTime", "key": nil, "value": map[string]any{"id": 1.0, "v": 2.0}, "headers": []any{}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("record order-1 (the latest of its key) = %v, want %v", got, want)
	}
	// The same records give the same Idempotency-Key, other records another.
	first := e.headers[0].Get("Idempotency-Key")
	sinktest.MustWrite(t, s, batch[:2]...)
	if again := e.headers[2].Get("Idempotency-Key"); again != first {
		t.Errorf("re-delivered request: Idempotency-Key %s, first time %s", again, first)
	}
	if e.headers[1].Get("Idempotency-Key") == first {
		t.Error("two requests of different records share an Idempotency-Key")
	}
}

// Regression guard: an Idempotency-Key made of the records' keys alone would
// let an endpoint that caches responses by it drop a later version of the
// same key (the same order id at a later offset).
func TestHTTPIdempotencyKeyCoversTheRecords(t *testing.T) {
	e := newEndpoint(t)
	keyer, _ := sinks.NewKeyer("{{ .Value.id }}")
	s := newKeyedHTTP(t, keyer, httpsink.Config{URL: e.srv.URL})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{"id":7,"v":1}`))
	sinktest.MustWrite(t, s, sinktest.Rec(0, 9, "", `{"id":7,"v":2}`))
	if a, b := e.headers[0].Get("Idempotency-Key"), e.headers[1].Get("Idempotency-Key"); a == b {
		t.Errorf("two versions of key 7 sent with one Idempotency-Key %s", a)
	}
}

func TestHTTPRetries(t *testing.T) {
	// in2s answers 503 with Retry-After: an HTTP date two seconds ahead
	// (whole seconds: a wait of one to two seconds).
	in2s := func(w http.ResponseWriter, store func()) bool {
		return status(503, time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))(w, store)
	}
	for _, tc := range []struct {
		name     string
		faults   []fault
		maxWait  time.Duration
		minTime  time.Duration // the waits Retry-After asks for
		maxTime  time.Duration
		requests int
	}{
		{"503 500 502 504 408", []fault{status(503, ""), status(500, ""), status(502, ""), status(504, ""), status(408, "")}, time.Minute, 0, time.Second, 6},
		{"connection resets", []fault{reset, storeThenReset, reset}, time.Minute, 0, time.Second, 4},
		{"429 Retry-After seconds", []fault{status(429, "1")}, time.Minute, time.Second, 3 * time.Second, 2},
		{"503 Retry-After HTTP date", []fault{in2s}, time.Minute, time.Second, 4 * time.Second, 2},
		{"Retry-After past the cap", []fault{status(429, "3600")}, 300 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 2},
		{"Retry-After date in the past", []fault{status(429, "Mon, 02 Jan 2006 15:04:05 GMT")}, time.Minute, 0, time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.faults...)
			s, log := newHTTPLogged(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 8, MaxRetryWait: tc.maxWait})
			start := time.Now()
			sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{"id":1}`))
			took := time.Since(start)
			if e.count() != tc.requests || len(e.stored()) != 1 {
				t.Errorf("%d requests, %d records stored, want %d and 1", e.count(), len(e.stored()), tc.requests)
			}
			var waited time.Duration
			for _, w := range loggedWaits(log) {
				waited += w
			}
			if waited < tc.minTime || waited > tc.maxTime {
				t.Errorf("waited %v in all, want %v..%v", waited, tc.minTime, tc.maxTime)
			}
			if took < waited {
				t.Errorf("took %v, less than the %v waited", took, waited)
			}
		})
	}
}

func TestHTTPBackoffGrows(t *testing.T) {
	e := newEndpoint(t, status(503, ""), status(503, ""), status(503, ""), status(503, ""))
	s, log := newHTTPLogged(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 8, RetryWait: 40 * time.Millisecond})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
	// Waits of 40, 80, 160, 320ms, each with up to half of it as jitter;
	// the next request comes no sooner.
	waits := loggedWaits(log)
	if len(waits) != 4 {
		t.Fatalf("%d waits logged, want 4", len(waits))
	}
	for i, want := range []time.Duration{20, 40, 80, 160} {
		want *= time.Millisecond
		if got := waits[i]; got < want || got > 2*want {
			t.Errorf("wait %d: %v, want %v..%v", i+1, got, want, 2*want)
		}
		if gap := e.times[i+1].Sub(e.times[i]); gap < waits[i] {
			t.Errorf("request %d came %v after the one before, within the wait of %v", i+2, gap, waits[i])
		}
	}
}

func TestHTTPGivesUp(t *testing.T) {
	always := make([]fault, 100)
	for i := range always {
		always[i] = status(503, "")
	}
	e := newEndpoint(t, always...)
	s := newHTTP(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 3})
	err := s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", "{}")})
	var se *httpsink.StatusError
	if !errors.As(err, &se) || se.Status != 503 || !sinks.Transient(err) || !strings.Contains(err.Error(), "4 attempts failed") {
		t.Fatalf("Write = %v, want a transient 503 after 4 attempts", err)
	}
	if e.count() != 4 {
		t.Errorf("%d requests, want 4 (1 + max_retries 3)", e.count())
	}
	e2 := newEndpoint(t, status(503, ""))
	if err := newHTTP(t, httpsink.Config{URL: e2.srv.URL, MaxRetries: 0}).Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", "{}")}); err == nil || e2.count() != 1 {
		t.Errorf("max_retries 0: Write = %v after %d requests, want an error after 1", err, e2.count())
	}
}

// A 4xx other than 408 and 429 is not retried. A 400 or 422 that names a
// record rejects that record; otherwise the whole request is refused.
func TestHTTPClientErrors(t *testing.T) {
	keyer, _ := sinks.NewKeyer("{{ .Value.id }}")
	batch := []record.Record{sinktest.Rec(4, 10, "", `{"id":"a"}`), sinktest.Rec(4, 11, "", `{"id":"b"}`), sinktest.Rec(4, 12, "", `{"id":"c"}`)}
	answer := func(code int, body string) fault {
		return func(w http.ResponseWriter, _ func()) bool { w.WriteHeader(code); io.WriteString(w, body); return true }
	}
	for _, tc := range []struct {
		name   string
		answer fault
		offset int64 // of the rejected record, -1 for none
	}{
		{"400 naming no record", answer(400, `{"error":"bad request"}`), -1},
		{"400 not JSON", answer(400, "<html>bad</html>"), -1},
		{"422 by index", answer(422, `{"error":"qty < 0","index":1}`), 11},
		{"422 by idempotency_key in errors", answer(422, `{"errors":[{"idempotency_key":"c","message":"unknown sku"}]}`), 12},
		{"400 index out of range", answer(400, `{"index":7}`), -1},
		{"404", answer(404, `{"index":1}`), -1},
		{"401", answer(401, "no token"), -1},
		{"413", answer(413, "too large"), -1},
		{"redirect", func(w http.ResponseWriter, _ func()) bool {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return true
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answer)
			s := newKeyedHTTP(t, keyer, httpsink.Config{URL: e.srv.URL, MaxRetries: 8})
			err := s.Write(t.Context(), batch)
			var re *record.Error
			switch {
			case err == nil:
				t.Fatal("Write succeeded")
			case e.count() != 1:
				t.Errorf("%d requests, want 1: a client error is not retried", e.count())
			case sinks.Transient(err):
				t.Errorf("Write = %v: a client error is not transient", err)
			case tc.offset < 0 && errors.As(err, &re):
				t.Errorf("Write = %v, want a plain error", err)
			case tc.offset >= 0 && (!errors.As(err, &re) || re.Offset != tc.offset || re.Partition != 4):
				t.Errorf("Write = %v, want a *record.Error for orders/4@%d", err, tc.offset)
			}
			if len(e.stored()) != 0 {
				t.Errorf("%d records stored", len(e.stored()))
			}
		})
	}
}

func TestHTTPCancelStopsRetries(t *testing.T) {
	always := make([]fault, 1000)
	for i := range always {
		always[i] = status(503, "")
	}
	e := newEndpoint(t, always...)
	s := newHTTP(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 100, RetryWait: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(150*time.Millisecond, cancel)
	start := time.Now()
	err := s.Write(ctx, []record.Record{sinktest.Rec(0, 1, "", "{}")})
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("Write = %v after %v, want context.Canceled soon after 150ms", err, time.Since(start))
	}
	// No request comes after Write returned: none of the sink's
	// goroutines, which post and wait between attempts, is left.
	if n := testenv.Goroutines("replay/sinks/http.(*Sink)."); n != 0 {
		t.Errorf("%d goroutines of the sink still run after Write returned: they may post again", n)
	}
}

// A wait that would end past the context's deadline is not started: Write
// gives up at once with a transient error.
func TestHTTPDeadlineBeforeNextAttempt(t *testing.T) {
	e := newEndpoint(t, status(429, "30"))
	s := newHTTP(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 8})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := s.Write(ctx, []record.Record{sinktest.Rec(0, 1, "", "{}")})
	if err == nil || !sinks.Transient(err) || !strings.Contains(err.Error(), "past the write deadline") || time.Since(start) > time.Second {
		t.Fatalf("Write = %v after %v, want a transient error at once", err, time.Since(start))
	}
}

// A request that hangs past RequestTimeout is abandoned and retried.
func TestHTTPRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	hang := func(http.ResponseWriter, func()) bool { <-release; return true }
	e := newEndpoint(t, hang)
	t.Cleanup(func() { close(release) }) // before the server closes: it waits for its handlers
	s := newHTTP(t, httpsink.Config{URL: e.srv.URL, MaxRetries: 2, RequestTimeout: 100 * time.Millisecond})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
	if e.count() != 2 || len(e.stored()) != 1 {
		t.Errorf("%d requests, %d stored, want 2 and 1", e.count(), len(e.stored()))
	}
}

// Credentials in the URL or the headers never show in errors or logs.
func TestHTTPSecretsNotShown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	var logs strings.Builder
	s, err := httpsink.New(httpsink.Config{URL: "http://user:pa55word@" + addr + "/hook?token=t0psecret", MaxRetries: 1, RetryWait: time.Millisecond,
		Headers: map[string]string{"Authorization": "Bearer s3cr3t"}, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", "{}")})
	if err == nil || !sinks.Transient(err) {
		t.Fatalf("Write = %v, want a transient connection error", err)
	}
	for _, secret := range []string{"pa55word", "t0psecret", "s3cr3t"} {
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("%q shows in the error or the logs:\n%v\n%s", secret, err, logs.String())
		}
	}
	if !strings.Contains(err.Error(), "http://"+addr+"/hook?...") {
		t.Errorf("error %q does not name the endpoint", err)
	}
	for _, bad := range []string{"ftp://host/x", "http:///path", "://nope"} {
		if _, err := httpsink.New(httpsink.Config{URL: bad}); err == nil {
			t.Errorf("NewHTTP(%q) succeeded", bad)
		}
	}
}

// The plan's request_timeout reaches the sink Open builds: an endpoint
// that hangs is abandoned after it, and retried.
func TestHTTPOpenRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	hang := func(http.ResponseWriter, func()) bool { <-release; return true }
	e := newEndpoint(t, hang)
	t.Cleanup(func() { close(release) })
	retries := 1
	s, err := httpsink.Open(t.Context(), sinks.Spec{Plan: plan.Sink{Type: httpsink.Type, Config: &httpsink.Section{URL: e.srv.URL, MaxRetries: &retries,
		MaxRetryWait: plan.Duration(time.Millisecond), RequestTimeout: plan.Duration(150 * time.Millisecond)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", "{}"))
	if took := time.Since(start); e.count() != 2 || took < 150*time.Millisecond || took > 5*time.Second {
		t.Errorf("%d requests in %s, want the first abandoned after 150ms (not the default 30s) and a second", e.count(), took)
	}
}

// keyedHTTP is a http sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedHTTP struct {
	*httpsink.Sink
	keyer *sinks.Keyer
}

func (k keyedHTTP) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedHTTP(t *testing.T, keyer *sinks.Keyer, cfg httpsink.Config) keyedHTTP {
	t.Helper()
	return keyedHTTP{newHTTP(t, cfg), keyer}
}
