package plan

import (
	"strings"
	"testing"
)

func TestHasPasswordAndRedactDSN(t *testing.T) {
	tests := []struct {
		dsn      string
		has      bool
		redacted string
	}{
		{"postgres://app:hunter2@db:5432/orders", true, "postgres://app:xxxxx@db:5432/orders"},
		{"postgresql://app:p%40ss@db/orders?sslmode=require", true, "postgresql://app:xxxxx@db/orders?sslmode=require"},
		{"postgres://app@db:5432/orders", false, "postgres://app@db:5432/orders"},
		{"postgres://db/orders", false, "postgres://db/orders"},
		{"postgres://app:@db/orders", false, "postgres://app:xxxxx@db/orders"},
		// Regression: a password in the query was not seen.
		{"postgres://app@db/orders?sslmode=require&password=hunter2", true, "postgres://app@db/orders?sslmode=require&password=xxxxx"},
		// Regression: a password url.Parse refuses was not seen.
		{"postgres://app:pa{ss@db/orders", true, "postgres://app:xxxxx@db/orders"},
		{"host=db user=app password=hunter2 dbname=orders", true, "host=db user=app password=xxxxx dbname=orders"},
		{"host=db password = 'a b&c' dbname=orders", true, "host=db password = xxxxx dbname=orders"},
		{"password=hunter2", true, "password=xxxxx"},
		{"PASSWORD=hunter2 host=db", true, "PASSWORD=xxxxx host=db"},
		{"host=db user=app dbname=orders", false, "host=db user=app dbname=orders"},
		{"host=db passwordless=1", false, "host=db passwordless=1"},
		{"", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			if got := hasPassword(tt.dsn); got != tt.has {
				t.Errorf("hasPassword = %v, want %v", got, tt.has)
			}
			got := RedactDSN(tt.dsn)
			if got != tt.redacted {
				t.Errorf("RedactDSN = %q, want %q", got, tt.redacted)
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("RedactDSN leaks the password: %q", got)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"brokers", "topic", "partitions", "isolation", "tls", "sasl", "client_id"}
	tests := []struct {
		in, want string
	}{
		{"isolaton", "isolation"},
		{"Topic", "topic"},
		{"broker", "brokers"},
		{"partition", "partitions"},
		{"tlss", "tls"},
		{"clientid", "client_id"},
		{"group", ""},
		{"zzzzzzzz", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Suggest(tt.in, names); got != tt.want {
				t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	// Regression: only the input was lower-cased, so upper-case candidates
	// (SASL mechanisms) were never suggested.
	if got := Suggest("scram-sha-512", []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}); got != "SCRAM-SHA-512" {
		t.Errorf("suggest(scram-sha-512) = %q", got)
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"topic", "topic", 0},
		{"isolaton", "isolation", 1},
		{"kitten", "sitting", 3},
		{"flaw", "lawn", 2},
	}
	for _, tt := range tests {
		t.Run(tt.a+"/"+tt.b, func(t *testing.T) {
			if got := levenshtein(tt.a, tt.b); got != tt.want {
				t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := levenshtein(tt.b, tt.a); got != tt.want {
				t.Errorf("levenshtein(%q, %q) = %d, want %d (symmetry)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

const fingerprintBase = `version: 1
name: orders-fix
description: first draft
source:
  brokers: ["kafka-1:9092"]
  topic: orders
  sasl: {mechanism: SCRAM-SHA-512, username: replay, password: "${KAFKA_PASSWORD}"}
group: replay.orders-fix
window:
  from: 2026-11-03T10:00:00Z
  to: 2026-11-03T12:30:00Z
throttle: {records_per_second: 2000}
sink:
  type: file
  path: out/orders.jsonl
  key: '{{ .Value.id }}'
`

func TestFingerprint(t *testing.T) {
	fingerprint := func(t *testing.T, src string, env map[string]string) string {
		t.Helper()
		opts := testOptions()
		if env != nil {
			opts.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		}
		p, err := Parse("plan.yaml", []byte(src), opts)
		if err != nil {
			t.Fatalf("Parse:\n%v\nplan:\n%s", err, src)
		}
		return p.Fingerprint()
	}
	base := fingerprint(t, fingerprintBase, nil)
	if len(base) != 16 {
		t.Errorf("fingerprint %q: want 16 hex characters", base)
	}
	if again := fingerprint(t, fingerprintBase, nil); again != base {
		t.Errorf("same plan, different fingerprints: %s, %s", base, again)
	}
	tests := []struct {
		name     string
		old, new string
		env      map[string]string
		changes  bool
	}{
		{name: "throttle", old: "records_per_second: 2000", new: "records_per_second: 50"},
		{name: "throttle bytes", old: "records_per_second: 2000", new: "records_per_second: 2000, bytes_per_second: 5MiB"},
		{name: "brokers", old: `["kafka-1:9092"]`, new: `["kafka-2:9092", "kafka-3:9092"]`},
		{name: "password", env: map[string]string{"KAFKA_PASSWORD": "rotated"}},
		{name: "description", old: "first draft", new: "reviewed by Ana"},
		{name: "window from", old: "from: 2026-11-03T10:00:00Z", new: "from: 2026-11-03T09:00:00Z", changes: true},
		{name: "window to", old: "to: 2026-11-03T12:30:00Z", new: "to: 2026-11-03T13:00:00Z", changes: true},
		{name: "window offsets", old: "  from: 2026-11-03T10:00:00Z\n  to: 2026-11-03T12:30:00Z", new: "  offsets: {0: {from: 0, to: 10}}", changes: true},
		{name: "topic", old: "topic: orders", new: "topic: orders-v2", changes: true},
		{name: "group", old: "group: replay.orders-fix", new: "group: replay.orders-fix-2", changes: true},
		{name: "sink path", old: "out/orders.jsonl", new: "out/orders-2.jsonl", changes: true},
		{name: "sink key", old: "{{ .Value.id }}", new: "{{ .Key }}", changes: true},
		{name: "partitions", old: "topic: orders", new: "topic: orders\n  partitions: [0, 1]", changes: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fingerprintBase
			if tt.old != "" {
				if !strings.Contains(src, tt.old) {
					t.Fatalf("base plan has no %q", tt.old)
				}
				src = strings.Replace(src, tt.old, tt.new, 1)
			}
			got := fingerprint(t, src, tt.env)
			if changed := got != base; changed != tt.changes {
				t.Errorf("fingerprint changed = %v, want %v", changed, tt.changes)
			}
		})
	}
}

func TestFingerprintPartitionsAllEqualsDefault(t *testing.T) {
	withAll := strings.Replace(fingerprintBase, "topic: orders", "topic: orders\n  partitions: all", 1)
	a, err := Parse("a.yaml", []byte(withAll), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte(fingerprintBase), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Error(`"partitions: all" and the default give different fingerprints`)
	}
}

// Regression: the threshold (half the letters plus two) suggested unrelated
// words: "update" for on_conflict: replace.
func TestSuggestNotForUnrelatedWords(t *testing.T) {
	if got := Suggest("replace", []string{"update", "ignore"}); got != "" {
		t.Errorf(`suggest("replace") = %q, want none`, got)
	}
	if got := Suggest("committed", []string{ReadCommitted, ReadUncommitted}); got != ReadCommitted {
		t.Errorf(`suggest("committed") = %q, want %q`, got, ReadCommitted)
	}
}

// TestGroupInvisibleCharacters: a group name holding a character that
// displays as nothing or reorders the text (which disguises the name in a
// reviewed plan), or a whitespace character of any script, is refused,
// naming the character; a plain name passes.
func TestGroupInvisibleCharacters(t *testing.T) {
	for _, tc := range []struct{ name, group, want string }{
		{"right-to-left override", "replay.\u202eorders", "U+202E"},
		{"first strong isolate", "replay.\u2068orders\u2069", "U+2068"},
		{"zero-width space", "replay.or\u200bders", "U+200B"},
		{"escape", `"replay.\u001b[2Korders"`, "U+001B"},
		{"space", `"replay.ord ers"`, "whitespace character U+0020"},
		{"no-break space", "replay.ord\u00a0ers", "whitespace character U+00A0"},
		{"ideographic space", "replay.ord\u3000ers", "whitespace character U+3000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(schedulePlan("{from: 2026-11-01T00:00:00Z, to: 2026-11-02T00:00:00Z}"), "group: replay.hourly", "group: "+tc.group, 1)
			_, err := Parse("p.yaml", []byte(body), LoadOptions{Sinks: testSinks})
			if err == nil || !strings.Contains(err.Error(), "group:") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v, want a group problem naming %s", err, tc.want)
			}
		})
	}
	body := schedulePlan("{from: 2026-11-01T00:00:00Z, to: 2026-11-02T00:00:00Z}")
	if _, err := Parse("p.yaml", []byte(body), LoadOptions{Sinks: testSinks}); err != nil {
		t.Fatalf("a plain group: %v", err)
	}
}
