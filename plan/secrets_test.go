package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// secretEnv holds distinctive secrets, so that a leak cannot go unnoticed.
var secretEnv = map[string]string{
	"KAFKA_BROKERS":  "k1:9092",
	"SRC_PW":         "S3cr3t-SRC",
	"SINK_PW":        "S3cr3t-SINK",
	"ORDERS_DSN":     "postgres://app:S3cr3t-DSN@db:5432/shop",
	"DL_DSN":         "host=db user=app password=S3cr3t-KV dbname=shop",
	"API_TOKEN":      "S3cr3t-TOK",
	"API_URL":        "https://user:S3cr3t-URLPW@api.example/replay?token=S3cr3t-QTOK&tenant=acme",
	"BAD_URL":        "https://user:S3cr3t-BADURL@api.example:port/x",
	"NOT_HTTP_URL":   "ftp://api.example/x?token=S3cr3t-FTP",
	"HEADERS_SCALAR": "Authorization: Bearer S3cr3t-HDRS",
	"SASL_SCALAR":    "S3cr3t-SASLMAP",
}

var leakMarker = "S3cr3t"

func parseWithSecrets(t *testing.T, yaml string) (*Plan, error) {
	t.Helper()
	env := func(k string) (string, bool) { v, ok := secretEnv[k]; return v, ok }
	return Parse("p.yaml", []byte(yaml), LoadOptions{Sinks: testSinks, LookupEnv: env})
}

const secretsHead = `version: 1
name: p
source:
  brokers: ["${KAFKA_BROKERS}"]
  topic: orders
  sasl: {mechanism: SCRAM-SHA-512, username: u, password: "${SRC_PW}"}
group: replay.p
window: {offsets: {0: {from: earliest, to: latest}}}
throttle: {records_per_second: 100}
`

func TestSecrets(t *testing.T) {
	tests := []struct {
		name, sink string
		want       []string
	}{
		{"kafka sink", `sink: {type: kafka, brokers: ["k2:9092"], topic: t, tls: {enabled: true}, sasl: {mechanism: PLAIN, username: u, password: "${SINK_PW}"}, batch_size: 100}`,
			[]string{"S3cr3t-SRC", "S3cr3t-SINK"}},
		{"postgres sink, key=value dead letter", "sink: {type: postgres, dsn: \"${ORDERS_DSN}\", table: t, batch_size: 100}\non_error: dead_letter\ndead_letter: {type: postgres, dsn: \"${DL_DSN}\", table: dl}",
			[]string{"S3cr3t-SRC", "S3cr3t-DSN", "S3cr3t-KV"}},
		{"http sink", `sink: {type: http, url: "${API_URL}", headers: {Authorization: "Bearer ${API_TOKEN}", X-Tenant: acme}, batch_size: 100}`,
			[]string{"S3cr3t-SRC", "Bearer S3cr3t-TOK", "S3cr3t-TOK", "S3cr3t-URLPW", "S3cr3t-QTOK"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseWithSecrets(t, secretsHead+tt.sink+"\n")
			if err != nil {
				t.Fatal(err)
			}
			got := p.Secrets()
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("Secrets() = %q, want it to hold %q", got, w)
				}
			}
			if slices.Contains(got, "acme") {
				t.Errorf("Secrets() = %q: a header that is not a credential is not a secret", got)
			}
		})
	}
}

// Regression: validation quoted an http sink's URL from the environment
// (url.Parse errors quote it whole; url.URL.Redacted keeps the query), and
// decoding quoted a credential setting's value from the environment when it
// had the wrong shape.
func TestProblemsDoNotQuoteSecrets(t *testing.T) {
	tests := []struct{ name, sink, want string }{
		{"unparsable url", `sink: {type: http, url: "${BAD_URL}", batch_size: 100}`, "sink.url: not a URL"},
		{"url of another scheme", `sink: {type: http, url: "${NOT_HTTP_URL}", batch_size: 100}`, "want an http:// or https:// URL"},
		{"headers as a scalar", `sink: {type: http, url: "https://api.example/x", headers: ${HEADERS_SCALAR}, batch_size: 100}`, "got the value of ${HEADERS_SCALAR}"},
		{"sasl as a scalar", `sink: {type: kafka, brokers: ["k2:9092"], topic: t, sasl: ${SASL_SCALAR}, batch_size: 100}`, "got the value of ${SASL_SCALAR}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWithSecrets(t, secretsHead+tt.sink+"\n")
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("want an invalid plan, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want %q in:\n%s", tt.want, err)
			}
			if strings.Contains(err.Error(), leakMarker) {
				t.Errorf("a secret leaked into:\n%s", err)
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor("S3cr3t-TOK", "p@ss w\"rd", "abc", "")
	for in, want := range map[string]string{
		"token S3cr3t-TOK refused":                       "token xxxxx refused",
		`password "p@ss w\"rd"`:                          `password "xxxxx"`,
		"postgres://u:p%40ss%20w%22rd@db/x":              "postgres://u:xxxxx@db/x",
		`{"message":"pw p@ss w\"rd","offset":1234}`:      `{"message":"pw xxxxx","offset":1234}`,
		"abc is too short to be redacted: it stays abc.": "abc is too short to be redacted: it stays abc.",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Redactor
	if got := none.String("S3cr3t"); got != "S3cr3t" {
		t.Errorf("a nil Redactor changed %q to %q", "S3cr3t", got)
	}
}
