package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// StatusError is a response that is not a 2xx.
type StatusError struct {
	Status int
	// Body is the start of the response body, for the message.
	Body string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// attempt is the outcome of one request.
type attempt struct {
	err        error // nil: a 2xx
	retry      bool  // the error may pass: try again
	retryAfter time.Duration
	hasAfter   bool
	body       []byte // of a rejection
}

// post sends one request, retrying what may pass.
func (s *Sink) post(ctx context.Context, recs []record.Record, keys []string) error {
	b := body(recs, keys, s.format)
	idem := idempotencyKey(recs, keys)
	for n := 0; ; n++ {
		a := s.send(ctx, b, idem)
		switch {
		case a.err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("http sink: POST %s: %w (after %d attempts, the last: %v)", s.where, ctx.Err(), n+1, a.err)
		case !a.retry:
			return s.rejection(recs, keys, a)
		case n >= s.retries:
			return &sinks.TransientError{Err: fmt.Errorf("http sink: POST %s: %d attempts failed, the last: %w", s.where, n+1, a.err)}
		}
		wait := s.backoff(n, a)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return &sinks.TransientError{Err: fmt.Errorf("http sink: POST %s: giving up after %d attempts: the next one, in %s, would be past the write deadline; the last: %w",
				s.where, n+1, wait.Round(time.Millisecond), a.err)}
		}
		s.log.Warn().Str("url", s.where).Int("attempt", n+1).Dur("wait", wait).Err(a.err).
			Int32("partition", recs[0].Partition).Int64("offset", recs[0].Offset).Msg("http sink: request failed, retrying")
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("http sink: POST %s: %w (after %d attempts, the last: %v)", s.where, ctx.Err(), n+1, a.err)
		}
	}
}

// backoff is the wait before attempt n+1: exponential from RetryWait with
// jitter (half of it random, so that partitions failing together do not
// retry together), or what Retry-After asks plus up to a tenth (at most a
// second) of jitter; capped at MaxRetryWait either way.
func (s *Sink) backoff(n int, a attempt) time.Duration {
	if a.hasAfter {
		jitter := min(a.retryAfter/10, time.Second)
		if jitter > 0 {
			jitter = rand.N(jitter)
		}
		return min(a.retryAfter+jitter, s.maxWait)
	}
	d := s.maxWait
	if n < 30 && s.firstWait<<n < s.maxWait {
		d = s.firstWait << n
	}
	return d/2 + rand.N(d/2+1)
}

// send makes one request.
func (s *Sink) send(ctx context.Context, b []byte, idem string) attempt {
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.url, bytes.NewReader(b))
	if err != nil {
		return attempt{err: redactURLError(err)}
	}
	req.Header = s.headers.Clone()
	req.Header.Set("Idempotency-Key", idem)
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = s.where // the query may hold a token
		}
		return attempt{err: err, retry: true} // network error or timeout
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return attempt{}
	}
	a := attempt{err: &StatusError{Status: resp.StatusCode, Body: snippet([]byte(s.redact.String(string(head))))}, body: head}
	switch code := resp.StatusCode; {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		a.retry = true
		a.retryAfter, a.hasAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	case code >= 300 && code < 400:
		a.err = fmt.Errorf("%w: redirected to %q; the sink does not follow redirects (a redirected POST may be replayed as a GET): set url to the final address",
			a.err, s.redact.String(resp.Header.Get("Location")))
	}
	return a
}

// snippet is the start of a response body as one line of text.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// parseRetryAfter reads a Retry-After header: delta-seconds or an HTTP date
// (RFC 9110 §10.2.3). A date in the past means now.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		return time.Duration(min(secs, 1<<32)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// rejection is the error for a request the endpoint refused for good: a
// *record.Error when a 400 or 422 names the record, else a plain error.
func (s *Sink) rejection(recs []record.Record, keys []string, a attempt) error {
	err := fmt.Errorf("http sink: POST %s: %w", s.where, a.err)
	var se *StatusError
	if !errors.As(a.err, &se) || se.Status != http.StatusBadRequest && se.Status != http.StatusUnprocessableEntity {
		return err
	}
	if i := rejectedRecord(a.body, keys); i >= 0 {
		return record.NewError(&recs[i], err)
	}
	return err
}

// rejectedRecord returns the position of the record a rejection names, or -1.
func rejectedRecord(b []byte, keys []string) int {
	type naming struct {
		IdempotencyKey *string `json:"idempotency_key"`
		Index          *int    `json:"index"`
	}
	var resp struct {
		naming
		Errors []naming `json:"errors"`
	}
	if json.Unmarshal(b, &resp) != nil {
		return -1
	}
	n := resp.naming
	if n.IdempotencyKey == nil && n.Index == nil && len(resp.Errors) > 0 {
		n = resp.Errors[0]
	}
	switch {
	case n.Index != nil && *n.Index >= 0 && *n.Index < len(keys):
		return *n.Index
	case n.IdempotencyKey != nil:
		return slices.Index(keys, *n.IdempotencyKey)
	}
	return -1
}
