// Package registry is a client of the Confluent Schema Registry REST API,
// reduced to what decoding needs: a schema by id, a subject's version (for
// references), the subjects and versions of an id. It retries the
// transient failures (timeouts, connection errors, 5xx, 429 with its
// Retry-After) within a budget, fails over between URLs, and fails at once
// on 401 and 403.
package registry

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/tlsfiles"
)

// Config says how to reach the registry.
type Config struct {
	// URLs are tried in order, the next one after a transient failure.
	URLs []string
	// Username and Password are HTTP basic auth; BearerToken is sent as
	// "Authorization: Bearer <token>" instead. All empty: no auth.
	Username, Password, BearerToken string
	// CAFile (PEM) is the CA the server's certificate is checked against
	// (default: the system's); CertFile and KeyFile (PEM) are the client's
	// certificate, for mutual TLS.
	CAFile, CertFile, KeyFile string
}

// Options tune a Client.
type Options struct {
	// RetryBudget is how long one request may keep failing transiently
	// before it is given up (0: at the first failure).
	RetryBudget time.Duration
	// BudgetName names RetryBudget in the error of a request that spent
	// it; "" is the plan's retry.max_elapsed.
	BudgetName string
	// HTTPClient sends the requests; nil builds one with a 10 s timeout per
	// attempt and Config's TLS.
	HTTPClient *http.Client
	Logger     zerolog.Logger
}

// Client is a Schema Registry client. It is safe for concurrent use.
type Client struct {
	urls   []string
	cfg    Config
	http   *http.Client
	budget time.Duration
	name   string // of the budget
	log    zerolog.Logger
	// answered is the index in urls of the URL that answered last: the
	// next request starts there.
	answered atomic.Int32
}

// DefaultTimeout bounds one HTTP attempt when Options.HTTPClient is nil.
const DefaultTimeout = 10 * time.Second

// New returns a client for cfg. An error names a TLS file that does not
// load or a URL that does not parse.
func New(cfg Config, opts Options) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("schema registry: no url")
	}
	c := &Client{cfg: cfg, http: opts.HTTPClient, budget: opts.RetryBudget, name: cmp.Or(opts.BudgetName, "the plan's retry.max_elapsed"), log: opts.Logger}
	for _, u := range cfg.URLs {
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		if _, err := url.Parse(u); err != nil {
			return nil, fmt.Errorf("schema registry url %q: %w", u, err)
		}
		c.urls = append(c.urls, strings.TrimRight(u, "/"))
	}
	if c.http == nil {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		c.http = &http.Client{Transport: tr, Timeout: DefaultTimeout}
	}
	return c, nil
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc, err := tlsfiles.Config(cfg.CAFile, cfg.CertFile, cfg.KeyFile, time.Now())
	if err != nil {
		return nil, fmt.Errorf("schema registry tls %w", err)
	}
	return tc, nil
}

// Reference is a schema's reference to another subject's version: Name is
// how the schema names it (an Avro type's full name, a .proto import path).
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Schema is a schema as the registry holds it.
type Schema struct {
	Schema string `json:"schema"`
	// Type is AVRO, PROTOBUF or JSON (the registry leaves it out for AVRO).
	Type       string      `json:"schemaType"`
	References []Reference `json:"references"`
}

// SubjectSchema is a schema as one subject's version.
type SubjectSchema struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Schema
}

// SubjectVersion names a subject's version.
type SubjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// SchemaByID returns the schema of id (GET /schemas/ids/{id}). An id the
// registry does not know is an error matching ErrNotFound.
func (c *Client) SchemaByID(ctx context.Context, id int32) (Schema, error) {
	var s Schema
	err := c.get(ctx, fmt.Sprintf("/schemas/ids/%d", id), &s, false)
	s.Type = cmp.Or(s.Type, "AVRO")
	return s, err
}

// SchemaByVersion returns subject's version (GET
// /subjects/{subject}/versions/{version}).
func (c *Client) SchemaByVersion(ctx context.Context, subject string, version int) (SubjectSchema, error) {
	var s SubjectSchema
	err := c.get(ctx, fmt.Sprintf("/subjects/%s/versions/%d", url.PathEscape(subject), version), &s, false)
	s.Type = cmp.Or(s.Type, "AVRO")
	return s, err
}

// VersionsByID returns the subjects' versions that hold id (GET
// /schemas/ids/{id}/versions); deleted adds the versions soft-deleted since
// (?deleted=true).
func (c *Client) VersionsByID(ctx context.Context, id int32, deleted bool) ([]SubjectVersion, error) {
	var vs []SubjectVersion
	path := fmt.Sprintf("/schemas/ids/%d/versions", id)
	if deleted {
		path += "?deleted=true"
	}
	err := c.get(ctx, path, &vs, false)
	return vs, err
}

// Check reaches the registry once (GET /subjects): a wrong URL, a TLS
// problem or refused credentials fail here rather than at the first
// record.
func (c *Client) Check(ctx context.Context) error {
	var subjects []string
	return c.get(ctx, "/subjects", &subjects, true)
}
