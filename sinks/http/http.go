// Package http is the sink that POSTs batches of records as JSON to an
// HTTP endpoint.
package http

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Config configures an HTTP sink.
type Config struct {
	// URL is the endpoint every request is POSTed to (http or https).
	URL string
	// Headers are sent with every request (authentication, routing).
	Headers map[string]string
	// BatchSize is the largest number of records per request; default
	// plan.DefaultBatchSize. 1 posts every record on its own.
	BatchSize int
	// MaxRetries is how often a request is retried after a network error, a
	// 5xx, a 408 or a 429; 0 never retries.
	MaxRetries int
	// MaxRetryWait caps one wait between attempts, from the backoff or from
	// Retry-After; default 1m.
	MaxRetryWait time.Duration
	// RetryWait is the first backoff wait, doubled after each attempt;
	// default 500ms.
	RetryWait time.Duration
	// RequestTimeout bounds one attempt, response included; default 30s.
	RequestTimeout time.Duration
	// ValueFormat is how values are written (the plan's value_format); ""
	// is auto. A value it cannot write is a bad record (*record.Error).
	ValueFormat encode.ValueFormat
	// Connections is how many requests of one Write go out at once
	// (sink.connections, 1..sinks.MaxConnections; 0 is 1). Records are
	// sharded by idempotency key, so all records of a key go through one
	// connection, in order.
	Connections int
	// Client sends the requests; default a client with a transport like
	// Go's default that keeps enough idle connections to the endpoint for
	// every partition and connection. The sink never follows redirects,
	// whatever the client says.
	Client *http.Client
	// Log receives diagnostics (every retry, at warn level); the zero value
	// discards them.
	Log zerolog.Logger
}

// HTTP POSTs records to an endpoint as JSON, up to BatchSize per request:
//
//	POST <url>
//	Content-Type: application/json
//	Idempotency-Key: <hex SHA-256 of the request's records>
//
//	[{"idempotency_key":"order-42","topic":"orders","partition":3,"offset":1200,
//	  "timestamp":"2026-11-03T10:00:00.123Z","timestamp_type":"CreateTime",
//	  "key":"k-1","value":{"id":42},
//	  "headers":[{"key":"trace","value":"abc"}]}, ...]
//
// Each object is the record as AppendJSONL writes it, preceded by
// idempotency_key, the record's idempotency key (the key template, default
// "<topic>/<partition>/<offset>"). Records are in offset order.
//
// Idempotency is the endpoint's part of the contract: it must store each
// record under its idempotency_key so that receiving it again changes
// nothing. The Idempotency-Key header identifies the request's records
// (keys and source coordinates): a retry carries the same header, a
// request of other records never does.
//
// A request counts as written only after a 2xx response. Network errors,
// timeouts, 5xx, 408 and 429 are retried up to MaxRetries times with
// exponential backoff and jitter, waiting at least what Retry-After asks,
// each wait capped at MaxRetryWait; then the error is a *TransientError,
// which the runner does not retry again (Capabilities.RetriesItself). A
// redirect or any other 4xx is an error at once: when a 400 or 422 names
// the record it rejects, by a JSON body {"idempotency_key": "..."} or
// {"index": n}, at the top level or as the first element of an "errors"
// array, Write returns a *record.Error for it.
//
// Write is synchronous, safe for concurrent use, and keeps nothing of the
// batch. Errors and logs show the URL without its query or credentials,
// never the headers.
type Sink struct {
	client    *http.Client
	url       string
	where     string // the URL without query and user info, for messages
	headers   http.Header
	batchSize int
	format    encode.ValueFormat
	retries   int
	maxWait   time.Duration
	firstWait time.Duration
	timeout   time.Duration
	conns     int
	log       zerolog.Logger
	redact    *plan.Redactor // the credentials, in what the endpoint answers
}

var _ sinks.Sink = (*Sink)(nil)

// Capabilities: the http sink retries itself and writes every record's key.
func (s *Sink) Capabilities() sinks.Capabilities {
	return sinks.Capabilities{RetriesItself: true, Keys: sinks.KeysAll}
}

// New checks cfg; it does not contact the endpoint (a POST is the only
// request it is known to accept).
func New(cfg Config) (*Sink, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("http sink: url: %w", redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("http sink: url %s: want an http:// or https:// URL with a host", safeURL(u))
	}
	if cfg.Connections < 0 || cfg.Connections > sinks.MaxConnections {
		return nil, fmt.Errorf("http sink: connections %d: want 1..%d", cfg.Connections, sinks.MaxConnections)
	}
	s := &Sink{url: cfg.URL, where: safeURL(u), headers: http.Header{}, format: cfg.ValueFormat, retries: max(cfg.MaxRetries, 0),
		batchSize: cmp.Or(max(cfg.BatchSize, 0), plan.DefaultBatchSize), conns: max(cfg.Connections, 1),
		maxWait:   cmp.Or(max(cfg.MaxRetryWait, 0), time.Duration(DefaultMaxRetryWait)),
		firstWait: cmp.Or(max(cfg.RetryWait, 0), 500*time.Millisecond),
		timeout:   cmp.Or(max(cfg.RequestTimeout, 0), 30*time.Second), log: cfg.Log,
		redact: plan.NewRedactor(secrets(cfg.URL, cfg.Headers)...)}
	for name, v := range cfg.Headers {
		s.headers.Set(name, v)
	}
	s.headers.Set("Content-Type", "application/json")
	if s.headers.Get("User-Agent") == "" {
		s.headers.Set("User-Agent", "replay")
	}
	client := http.Client{Transport: defaultTransport}
	if cfg.Client != nil {
		client = *cfg.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.client = &client
	return s, nil
}

// safeURL is u without user info, query and fragment: what messages show.
func safeURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	if u.RawQuery != "" {
		return c.String() + "?..."
	}
	return c.String()
}

// redactURLError drops the URL url.Parse quotes in its error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// defaultTransport is Go's default transport keeping up to 256 idle
// connections per host (Go's keeps 2), one for each partition and connection.
var defaultTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 256
	return t
}()

// Write posts batch in requests of up to BatchSize records and returns
// once every request got a 2xx. With Connections above 1 the records are
// sharded by idempotency key (shardOf), each shard's requests in order on
// their own connection, the shards at once. When a request fails, Write
// waits for the other shards and returns the first shard's failure.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("http sink: POST %s: %w", s.where, err)
	}
	if err := encode.CheckBatch(batch, s.format); err != nil {
		return err
	}
	keys := make([]string, len(batch))
	for i := range batch {
		keys[i] = batch[i].IdempotencyKey()
	}
	post := s.postSharded
	if s.conns == 1 || len(batch) == 1 {
		post = s.postAll
	}
	if err := post(ctx, batch, keys); err != nil {
		return err
	}
	s.log.Debug().Str("url", s.where).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("records", len(batch)).Msg("posted")
	return nil
}

// postAll posts recs in order, in requests of up to BatchSize.
func (s *Sink) postAll(ctx context.Context, recs []record.Record, keys []string) error {
	for start := 0; start < len(recs); start += s.batchSize {
		end := min(start+s.batchSize, len(recs))
		if err := s.post(ctx, recs[start:end], keys[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// postSharded posts batch's shards at once.
func (s *Sink) postSharded(ctx context.Context, batch []record.Record, keys []string) error {
	shards := make([]struct {
		recs []record.Record
		keys []string
	}, s.conns)
	for i := range batch {
		sh := &shards[shardOf(keys[i], s.conns)]
		sh.recs = append(sh.recs, batch[i])
		sh.keys = append(sh.keys, keys[i])
	}
	errs := make([]error, s.conns)
	var wg sync.WaitGroup
	for i := range shards {
		if len(shards[i].recs) == 0 {
			continue
		}
		wg.Go(func() { errs[i] = s.postAll(ctx, shards[i].recs, shards[i].keys) })
	}
	wg.Wait()
	return cmp.Or(errs...)
}

// shardOf is the shard of an idempotency key among n: FNV-1a, so that a
// key has the same shard in every Write and every run.
func shardOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// body is the request body: a JSON array of the records as AppendJSONL
// writes them, each preceded by its idempotency_key, appended in place
// (the line's opening brace becomes a comma, its newline is dropped) into
// a buffer sized up front.
func body(recs []record.Record, keys []string, f encode.ValueFormat) []byte {
	n := 2
	for i := range recs {
		n += 160 + len(keys[i]) + len(recs[i].Key) + len(recs[i].Value)
		for _, h := range recs[i].Headers {
			n += 40 + len(h.Key) + len(h.Value)
		}
	}
	b := append(make([]byte, 0, n), '[')
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"idempotency_key":`...)
		b = encode.AppendJSONString(b, keys[i])
		at := len(b)
		b = encode.AppendJSONLChecked(b, &recs[i], f) // {...}\n
		b[at] = ','
		b = b[:len(b)-1]
	}
	return append(b, ']')
}

// idempotencyKey identifies a request's records: their idempotency keys
// and source coordinates (which fix their content).
func idempotencyKey(recs []record.Record, keys []string) string {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for i := range recs {
		field(keys[i])
		field(recs[i].Topic)
		binary.BigEndian.PutUint64(n[:], uint64(recs[i].Partition))
		h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(recs[i].Offset))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Finish does nothing: every Write is already acknowledged.
func (s *Sink) Finish(context.Context) error { return nil }

// Close releases idle connections.
func (s *Sink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
