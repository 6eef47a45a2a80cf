package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/replay-tool/replay/internal/backoff"
)

// ErrNotFound matches the error of a request for a schema id, subject or
// version the registry does not have (HTTP 404).
var ErrNotFound = errors.New("not found in the schema registry")

// ErrAuth matches the error of a request the registry refused (HTTP 401 or
// 403): retrying does not help.
var ErrAuth = errors.New("the schema registry refused the credentials")

// StatusError is a response with an error status.
type StatusError struct {
	URL    string
	Status int
	// Code and Message are the registry's error_code and message, when the
	// body holds them.
	Code    int
	Message string
	// RetryAfter is the response's Retry-After (429, 503); 0 without one.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("GET %s: HTTP %d: %s", e.URL, e.Status, msg)
}

// Is makes a 404 match ErrNotFound and a 401 or 403 match ErrAuth.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrAuth:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	return false
}

// NotRegistryError is a successful response (2xx) whose body is not the
// JSON a Schema Registry answers: the URL is some other server (a web
// page, a proxy's). It is not retried.
type NotRegistryError struct {
	URL    string
	Status int
	// Body is the response's body, of which Error quotes the start.
	Body []byte
	Err  error
}

func (e *NotRegistryError) Error() string {
	start := e.Body[:min(len(e.Body), 40)]
	return fmt.Sprintf("GET %s: HTTP %d, but the body (%q...) is not a Schema Registry's JSON (%v): check that decode.schema_registry.url points at the Schema Registry", e.URL, e.Status, start, e.Err)
}

func (e *NotRegistryError) Unwrap() error { return e.Err }

// transient reports whether a failed attempt may succeed later: a
// connection error or timeout, 5xx, 429; not a certificate the TLS
// settings do not trust.
func transient(err error) bool {
	var nr *NotRegistryError
	if errors.As(err, &nr) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests || se.Status == http.StatusRequestTimeout
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) {
		return false
	}
	return true // the transport's: refused, reset, timed out
}

// unreachable reports whether err says no registry listens at the URL: the
// connection was refused, or the host name does not resolve.
func unreachable(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns) && dns.IsNotFound
}

// get GETs path into out, retrying transient failures within the budget,
// each attempt on the next URL, from the one that answered last. atStart (the run's first request, Check),
// a URL where no registry listens (unreachable) is not retried: when none
// of the URLs has one, the run fails at once, before it reads a record.
func (c *Client) get(ctx context.Context, path string, out any, atStart bool) error {
	r := backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second, Budget: c.budget}.Start()
	reached := false // a registry answered, or may be slow to: retried
	first := int(c.answered.Load())
	for attempt := 0; ; attempt++ {
		i := (first + attempt) % len(c.urls)
		err := c.attempt(ctx, c.urls[i]+path, out)
		if err == nil {
			c.answered.Store(int32(i))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		reached = reached || !unreachable(err)
		if atStart && !reached && unreachable(err) {
			if attempt+1 < len(c.urls) {
				continue // the next URL
			}
			return fmt.Errorf("%w (no schema registry listens there: check decode.schema_registry.url)", err)
		}
		if errors.Is(err, ErrAuth) {
			return fmt.Errorf("%w: %w; check decode.schema_registry's username and password (or bearer_token) and the account's read access to the registry", ErrAuth, err)
		}
		if !transient(err) {
			return fmt.Errorf("%w (not retried: check decode.schema_registry's url and tls settings)", err)
		}
		wait, left, ok := r.Failed()
		if !ok {
			return fmt.Errorf("schema registry: %w (still failing after %d attempts over %s, %s)", err, r.Attempts(), r.Elapsed().Round(time.Millisecond), c.name)
		}
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > wait {
			wait = min(se.RetryAfter, left)
		}
		c.log.Warn().Err(err).Int64("retry_in_ms", wait.Milliseconds()).Msg("schema registry request failed; retrying")
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// maxBody bounds a response body: schemas are kilobytes.
const maxBody = 16 << 20

func (c *Client) attempt(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	switch {
	case c.cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.BearerToken)
	case c.cfg.Username != "" || c.cfg.Password != "":
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("GET %s: reading the response: %w", u, err)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{URL: u, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
		var e struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil {
			se.Code, se.Message = e.Code, e.Message
		}
		return se
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &NotRegistryError{URL: u, Status: resp.StatusCode, Body: body, Err: err}
	}
	return nil
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
