package decode

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/decode/registry"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const longSchema = `{"type":"record","name":"R","fields":[{"name":"n","type":"long"}]}`

// avroLong is the framed Avro record {"n": 5} under id.
func avroLong(id int32) []byte { return frame(id, []byte{10}) }

// counter counts the requests whose path is path, and may answer them in
// place of the registry: fault returns true when it answered.
type counter struct {
	path  string
	n     atomic.Int64
	fault func(n int64, w http.ResponseWriter) bool
}

func (c *counter) intercept(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != c.path {
		return false
	}
	n := c.n.Add(1)
	return c.fault != nil && c.fault(n, w)
}

func seeded(t *testing.T, opts ...srfake.Option) *srfake.Registry {
	t.Helper()
	reg := srfake.New(opts...)
	t.Cleanup(reg.Close)
	reg.SeedSchema("r-value", 1, 7, sr.Schema{Schema: longSchema})
	return reg
}

func decoderWith(t *testing.T, cfg Config, opts Options) *Decoder {
	t.Helper()
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t))
	d, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustDecode(t *testing.T, d *Decoder, b []byte) Decoded {
	t.Helper()
	got, err := d.Decode(context.Background(), Value, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.JSON) != `{"n":5}` {
		t.Fatalf("decoded %s, want {\"n\":5}", got.JSON)
	}
	return got
}

// 5xx answers are retried within the budget: two 503s, then the schema.
func TestRegistry5xxRetried(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/7", fault: func(n int64, w http.ResponseWriter) bool {
		if n <= 2 {
			http.Error(w, `{"error_code":50301,"message":"busy"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	}}
	reg.Intercept(c.intercept)
	var logs testenv.Buffer
	d, err := New(Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}},
		Options{RetryBudget: 10 * time.Second, Logger: zerolog.New(zerolog.MultiLevelWriter(&logs, zerolog.NewTestWriter(t)))})
	if err != nil {
		t.Fatal(err)
	}
	mustDecode(t, d, avroLong(7))
	if got := c.n.Load(); got != 3 {
		t.Fatalf("%d requests, want 3 (two 503s, then the schema)", got)
	}
	if n := testenv.MillisFields(t, logs.String(), "schema registry request failed; retrying", "retry_in_ms"); n != 2 {
		t.Errorf("%d retries logged, want 2", n)
	}
}

// A 429's Retry-After is waited for, though the backoff would be shorter.
func TestRegistry429HonoursRetryAfter(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/7", fault: func(n int64, w http.ResponseWriter) bool {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	}}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{RetryBudget: 10 * time.Second})
	start := time.Now()
	mustDecode(t, d, avroLong(7))
	if el := time.Since(start); el < time.Second {
		t.Fatalf("retried after %s, before the 1 s of Retry-After", el)
	}
	if got := c.n.Load(); got != 2 {
		t.Fatalf("%d requests, want 2", got)
	}
}

// An attempt that times out is retried.
func TestRegistryTimeoutRetried(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/7", fault: func(n int64, w http.ResponseWriter) bool {
		if n == 1 {
			time.Sleep(500 * time.Millisecond)
		}
		return false
	}}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}},
		Options{RetryBudget: 10 * time.Second, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	mustDecode(t, d, avroLong(7))
	if got := c.n.Load(); got != 2 {
		t.Fatalf("%d requests, want 2 (one timed out)", got)
	}
}

// A registry failing past the budget fails the run (not a bad record),
// saying for how long it failed.
func TestRegistryBudgetSpent(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/7", fault: func(int64, http.ResponseWriter) bool { panic(http.ErrAbortHandler) }}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{RetryBudget: 400 * time.Millisecond})
	start := time.Now()
	_, err := d.Decode(context.Background(), Value, avroLong(7))
	var bad *BadRecordError
	if err == nil || errors.As(err, &bad) {
		t.Fatalf("err %v, want a run failure", err)
	}
	if !strings.Contains(err.Error(), "retry.max_elapsed") {
		t.Fatalf("err %q does not name the budget", err)
	}
	if el := time.Since(start); el > 3*time.Second || c.n.Load() < 2 {
		t.Fatalf("%d attempts over %s, want a few within the 400ms budget", c.n.Load(), el)
	}
	// a budget of another name (replay plan's own limit) is named so
	named := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{RetryBudget: 200 * time.Millisecond, BudgetName: "the 30s limit of replay plan"})
	if _, err := named.Decode(context.Background(), Value, avroLong(7)); err == nil || !strings.Contains(err.Error(), "over ") || !strings.HasSuffix(err.Error(), ", the 30s limit of replay plan)") {
		t.Fatalf("err %v does not name the budget it spent", err)
	}
	// not cached: the next record asks again
	n := c.n.Load()
	_, _ = d.Decode(context.Background(), Value, avroLong(7))
	if c.n.Load() == n {
		t.Fatal("a transient failure was cached")
	}
}

// A registry failing past the budget at Check names the registry once:
// "decode: schema registry: GET ...", not "schema registry: schema
// registry: GET ...".
func TestRegistryBudgetSpentAtCheckSaysRegistryOnce(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/subjects", fault: func(_ int64, w http.ResponseWriter) bool {
		http.Error(w, `{"error_code":50001,"message":"OIDC Server is not available"}`, http.StatusInternalServerError)
		return true
	}}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{RetryBudget: 200 * time.Millisecond})
	err := d.Check(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "decode: schema registry: GET ") || strings.Count(err.Error(), "schema registry") != 1 {
		t.Fatalf("err %v, want one \"decode: schema registry: GET ...\"", err)
	}
}

// 401 and 403 fail at once, with no retry, at Check.
func TestRegistryAuthFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   RegistryConfig
		other string
	}{
		{"401 without credentials", RegistryConfig{}, "Missing"},
		{"403 wrong token", RegistryConfig{BearerToken: "wrong"}, "not authorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := seeded(t, srfake.WithAuth("Bearer right"))
			c := &counter{path: "/subjects"}
			reg.Intercept(c.intercept)
			tc.cfg.URLs = []string{reg.URL()}
			d := decoderWith(t, Config{Value: Avro, Registry: tc.cfg}, Options{RetryBudget: 30 * time.Second})
			start := time.Now()
			err := d.Check(context.Background())
			if !errors.Is(err, registry.ErrAuth) || !strings.Contains(err.Error(), tc.other) {
				t.Fatalf("err %v, want ErrAuth with %q", err, tc.other)
			}
			if c.n.Load() != 1 || time.Since(start) > 2*time.Second {
				t.Fatalf("%d requests in %s, want 1 at once", c.n.Load(), time.Since(start))
			}
		})
	}
}

// Basic auth and a bearer token are sent as the registry expects them.
func TestRegistryCredentials(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:s3cret"))
	for _, tc := range []struct {
		want string
		cfg  RegistryConfig
	}{
		{basic, RegistryConfig{Username: "svc", Password: "s3cret"}},
		{"Bearer tok", RegistryConfig{BearerToken: "tok"}},
	} {
		reg := seeded(t, srfake.WithAuth(tc.want))
		tc.cfg.URLs = []string{reg.URL()}
		d := decoderWith(t, Config{Value: Avro, Registry: tc.cfg}, Options{})
		if err := d.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustDecode(t, d, avroLong(7))
	}
}

// A schema id the registry does not have is a bad record, asked once.
func TestRegistry404NegativeCache(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/99"}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{RetryBudget: 10 * time.Second})
	for range 5 {
		_, err := d.Decode(context.Background(), Value, avroLong(99))
		var bad *BadRecordError
		if !errors.As(err, &bad) || bad.SchemaID != 99 || bad.Side != Value || !strings.Contains(bad.Reason, "404") {
			t.Fatalf("err %v, want a bad record naming id 99 and the 404", err)
		}
	}
	if got := c.n.Load(); got != 1 {
		t.Fatalf("%d requests for id 99, want 1", got)
	}
}

// Records decoded at once that name one new id fetch it once.
func TestRegistrySingleflight(t *testing.T) {
	reg := seeded(t)
	c := &counter{path: "/schemas/ids/7", fault: func(int64, http.ResponseWriter) bool {
		time.Sleep(100 * time.Millisecond)
		return false
	}}
	reg.Intercept(c.intercept)
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{reg.URL()}}}, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			got, err := d.Decode(context.Background(), Value, avroLong(7))
			if err == nil && string(got.JSON) != `{"n":5}` {
				err = errors.New("decoded " + string(got.JSON))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := c.n.Load(); got != 1 {
		t.Fatalf("%d requests for id 7 from 64 concurrent records, want 1", got)
	}
}

// The next URL is tried when one does not answer.
func TestRegistryFailover(t *testing.T) {
	reg := seeded(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{deadURL, reg.URL()}}}, Options{RetryBudget: 10 * time.Second})
	mustDecode(t, d, avroLong(7))
}

// The registry's certificate is checked against tls.ca_file; one the
// settings do not trust fails at once, not retried.
func TestRegistryTLS(t *testing.T) {
	reg := srfake.NewRegistry()
	reg.SeedSchema("r-value", 1, 7, sr.Schema{Schema: longSchema})
	srv := httptest.NewTLSServer(reg.Handler())
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{srv.URL}, CAFile: ca}}, Options{RetryBudget: 30 * time.Second})
	if err := d.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustDecode(t, d, avroLong(7))

	untrusted := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{srv.URL}}}, Options{RetryBudget: 30 * time.Second})
	start := time.Now()
	err := untrusted.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "not retried") || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s, want a certificate error at once", err, time.Since(start))
	}
}

// A URL that answers 200 with something other than a registry's JSON (a
// web page) fails at once, saying so, in one request.
func TestRegistryNotARegistryFailsAtOnce(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>"))
	}))
	defer srv.Close()
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{srv.URL}}}, Options{RetryBudget: 30 * time.Second})
	err := d.Check(context.Background())
	var nr *registry.NotRegistryError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), "not a Schema Registry's JSON") || !strings.Contains(err.Error(), "<html>") {
		t.Fatalf("err %v, want a NotRegistryError quoting the body", err)
	}
	if n.Load() != 1 {
		t.Fatalf("%d requests, want 1", n.Load())
	}
}

// At start, a URL where nothing listens (connection refused) fails at
// once, after trying the other URLs of the list; one that listens is
// used.
func TestRegistryUnreachableAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d := decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{dead}}}, Options{RetryBudget: 30 * time.Second})
	start := time.Now()
	err = d.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no schema registry listens there") || time.Since(start) > 5*time.Second {
		t.Fatalf("Check of %s: %v after %s, want the refusal at once", dead, err, time.Since(start))
	}
	reg := seeded(t)
	d = decoderWith(t, Config{Value: Avro, Registry: RegistryConfig{URLs: []string{dead, reg.URL()}}}, Options{RetryBudget: 30 * time.Second})
	if err := d.Check(context.Background()); err != nil {
		t.Fatalf("Check with a live second URL: %v", err)
	}
}
