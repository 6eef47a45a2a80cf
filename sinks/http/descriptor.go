package http

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the http sink's type in a plan.
const Type plan.SinkType = "http"

// Defaults of an http sink's retries.
const (
	// DefaultMaxRetries rides out a restart or a short overload of the
	// endpoint (1 to 2 minutes of backoff from 500ms, unless the write
	// deadline ends it first) before Write fails.
	DefaultMaxRetries = 8
	// DefaultMaxRetryWait keeps one wait short enough that an interrupted
	// run still finishes its in-flight batch in time.
	DefaultMaxRetryWait = plan.Duration(time.Minute)
	// DefaultRequestTimeout bounds one attempt of an http sink's request:
	// an endpoint that answers a batch in more time is retried.
	DefaultRequestTimeout = plan.Duration(30 * time.Second)
)

// Section is an http sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	URL            string            `yaml:"url"`
	Headers        map[string]string `yaml:"headers"`
	ValueFormat    string            `yaml:"value_format"`
	Connections    int               `yaml:"connections"`
	MaxRetries     *int              `yaml:"max_retries"`
	MaxRetryWait   plan.Duration     `yaml:"max_retry_wait"`
	RequestTimeout plan.Duration     `yaml:"request_timeout"`
}

// section returns the http sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the http sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "HTTP endpoint, batches POSTed as JSON arrays with an Idempotency-Key header",
	NewConfig: func() any { return new(Section) },
	Fields: []plan.FieldDescriptor{
		{Name: "url", Fingerprint: true, Credentials: true,
			Required: "missing: the endpoint to POST to, e.g. https://orders.internal/api/replay or ${ORDERS_API_URL}",
			Doc:      "http: the endpoint each batch is POSTed to as a JSON array.",
			Schema: map[string]any{"type": "string", "pattern": `^https?://|` + plan.EnvPattern,
				"examples": []any{"https://orders.internal/api/replay", "${ORDERS_API_URL}"}},
			FingerprintValue: func(val any, _ *plan.Sink, deadLetter bool) any {
				if deadLetter {
					return val // as the first version wrote a dead-letter sink's
				}
				return endpoint(val.(string))
			}},
		{Name: "headers", Credentials: true,
			Doc: "http: headers sent with every request; credentials (Authorization, tokens, API keys) must come from the environment, e.g. Authorization: \"Bearer ${ORDERS_API_TOKEN}\".",
			Schema: map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"},
				"examples": []any{map[string]any{"Authorization": "Bearer ${ORDERS_API_TOKEN}"}}}},
		encode.ValueFormatField,
		sinks.ConnectionsField,
		{Name: "max_retries", Default: strconv.Itoa(DefaultMaxRetries),
			Doc:    "http: retries of a request after a network error, 5xx, 408 or 429 (default 8; 0 never retries).",
			Schema: plan.OrEnv(map[string]any{"type": "integer", "minimum": 0, "maximum": 100})},
		{Name: "max_retry_wait", Default: time.Duration(DefaultMaxRetryWait).String(),
			Doc: "http: longest wait between two attempts, from the exponential backoff or from Retry-After (default 1m)."},
		{Name: "request_timeout", Default: time.Duration(DefaultRequestTimeout).String(),
			Doc: "http: how long one attempt of a request may take, the response included, before it is abandoned and retried like a network error (default 30s, up to 1h): raise it for an endpoint that takes longer over a batch."},
	},
	Check:   check,
	Shared:  true,
	Service: "service",
	UsesKey: true,
	Secrets: sectionSecrets,
}

// secrets returns the credentials an endpoint and its headers hold: the
// URL's password and credential query parameters, the values of
// credential headers (and the credentials after their auth scheme).
func secrets(url string, headers map[string]string) []string {
	return append(plan.URLSecrets(url), plan.HeaderSecrets(headers)...)
}

// sectionSecrets returns the credentials of an http section: those of its
// endpoint and headers, and the value of each ${VAR} a credential header
// was built from ("S3cr3t" in Authorization: "Bearer ${TOKEN}").
func sectionSecrets(ps *plan.Sink, written func(string) (string, bool)) []string {
	s := section(ps)
	out := secrets(s.URL, s.Headers)
	for name, val := range s.Headers {
		if raw, ok := written("headers." + name); ok && plan.IsSecretHeader(name) {
			out = append(out, plan.EnvParts(raw, val)...)
		}
	}
	return out
}

// endpoint is the part of a URL that says where records go, for the
// fingerprint: scheme, host and path, without the user info and query,
// which may hold credentials that are rotated during a run.
func endpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return raw
	}
	return u.Scheme + "://" + strings.ToLower(u.Host) + u.EscapedPath()
}

// headerNameRe is an HTTP header field name (RFC 9110 token).
var headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are set by the http sink itself.
var reservedHeaders = []string{"Idempotency-Key", "Content-Type", "Content-Length", "Host"}

// check checks an http section: its endpoint, headers and retries.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	encode.CheckDecodedValueFormat(c, s.ValueFormat)
	c.URL("url")
	sinks.CheckConnections(c, s.Connections)
	plain := strings.HasPrefix(strings.ToLower(s.URL), "http:")
	seen := map[string]string{} // canonical name -> the name written first
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		f, val := "headers."+name, s.Headers[name]
		other, dup := seen[http.CanonicalHeaderKey(name)]
		seen[http.CanonicalHeaderKey(name)] = cmp.Or(other, name)
		switch {
		case dup:
			c.Add(f, "%s and %s are one header (names are case-insensitive): keep one", other, name)
		case !headerNameRe.MatchString(name):
			c.Add(f, "%q is not an HTTP header name (ASCII letters, digits and !#$%%&'*+-.^_`|~)", name)
		case slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, name) }):
			c.Add(f, "the http sink sets %s itself: remove it", name)
		case strings.ContainsAny(val, "\r\n\x00"):
			c.Add(f, "the value contains a line break or NUL, which HTTP headers cannot carry")
		case plan.IsSecretHeader(name) && !c.FromEnv(f):
			example := `"${ORDERS_API_TOKEN}"`
			if strings.EqualFold(name, "Authorization") {
				example = `"Bearer ${ORDERS_API_TOKEN}"`
			}
			c.Add(f, "a literal secret must not be written in a plan: take it from the environment, e.g. %s: %s, and export the variable", name, example)
		case plan.IsSecretHeader(name) && plain:
			c.Warn(f, "sent over plain http: anyone on the network path can read the credentials; use https")
		}
	}
	if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > 100) {
		c.Add("max_retries", "%d: want 0..100 (0 never retries)", *s.MaxRetries)
	}
	if d := time.Duration(s.MaxRetryWait); d < 0 || d > time.Hour {
		c.Add("max_retry_wait", "%s: want a duration up to 1h, e.g. 1m", d)
	}
	if d := time.Duration(s.RequestTimeout); d < 0 || d > time.Hour {
		c.Add("request_timeout", "%s: want a duration up to 1h, e.g. 2m", d)
	}
}

// Open builds the http sink sp describes (a validated plan section of type
// http); without max_retries it retries DefaultMaxRetries times. On
// error the Sink is nil.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	retries := DefaultMaxRetries
	if c.MaxRetries != nil {
		retries = *c.MaxRetries
	}
	return sinks.Opened(New(Config{URL: c.URL, Headers: c.Headers, BatchSize: sp.Plan.BatchSize, MaxRetries: retries,
		MaxRetryWait: time.Duration(c.MaxRetryWait), RequestTimeout: time.Duration(c.RequestTimeout), ValueFormat: encode.ValueFormat(c.ValueFormat), Connections: c.Connections, Log: sp.Options.Log}))
}
