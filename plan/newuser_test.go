package plan

import (
	"strings"
	"testing"
)

// Mistakes a new user makes that validate must report, each with what to
// do instead.
func TestNewUserMistakes(t *testing.T) {
	const file = "  type: file\n  path: out/orders.jsonl\n"
	withSink := func(extra string) string { return strings.Replace(minimalPlan, file, file+extra, 1) }
	tests := []struct {
		name, src, want string
	}{
		{"second document", minimalPlan + "---\nversion: 1\nname: other\n", "plan.yaml:13:1: a second YAML document (after ---)"},
		{"topic list", strings.Replace(minimalPlan, "topic: orders", "topic: orders,payments", 1), `source.topic: "orders,payments" is not a topic name`},
		{"topic with a slash", strings.Replace(minimalPlan, "topic: orders", "topic: orders/eu", 1), `'/' is not an ASCII letter, digit`},
		{"topic with a non-ASCII letter", strings.Replace(minimalPlan, "topic: orders", "topic: ordérs", 1), `'é' is not an ASCII letter, digit`},
		{"name with a non-ASCII letter", strings.Replace(minimalPlan, "name: orders-fix", "name: vtést", 1), `name: "vtést": use ASCII letters (a-z, A-Z), digits, '.', '_' and '-' only, beginning with a letter or digit`},
		{"name beginning with '-'", strings.Replace(minimalPlan, "name: orders-fix", "name: -fix", 1), `beginning with a letter or digit`},
		{"topic too long", strings.Replace(minimalPlan, "topic: orders", "topic: "+strings.Repeat("o", 250), 1), "at most 249 characters; this one has 250"},
		{"lower-case field", withSink("  key: '{{ .value.id }}'\n"), "sink.key: .value.id: a key template sees .Topic"},
		{"lower-case field hint", withSink("  key: '{{ .value.id }}'\n"), "(did you mean .Value.id?)"},
		{"field of a string", withSink("  key: 'k-{{ .Key.id }}'\n"), ".Key is a plain value without fields; for a field of the JSON value write .Value.id"},
		{"unknown field in if", withSink("  key: '{{ if .Valeu }}x{{ end }}'\n"), "sink.key: .Valeu:"},
		{"epoch milliseconds keep their digits", strings.Replace(minimalPlan, "from: -2h", "from: 1700000000123", 1), "e.g. 2023-11-14T22:13:20.123Z if it was milliseconds"},
		{"bounds within one second", strings.Replace(minimalPlan, "from: -2h", "from: 2026-01-01T10:00:00.750Z\n  to: 2026-01-01T10:00:00.250Z", 1),
			"window.to: 2026-01-01T10:00:00.25Z is not after from (2026-01-01T10:00:00.75Z)"},
		{"epoch seconds with a fraction", strings.Replace(minimalPlan, "from: -2h", "from: 1700000000.5", 1), "e.g. 2023-11-14T22:13:20.5Z if it was seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseProblems(t, tt.src, testOptions()); !strings.Contains(got, tt.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", got, tt.want)
			}
		})
	}
	for _, ok := range []string{"  key: '{{ .Value.id }}'\n", "  key: '{{ with .Value }}{{ .id }}{{ end }}'\n", "  key: '{{ .Timestamp.Unix }}-{{ .Partition }}'\n", "  key: '{{ index .Headers \"h\" }}'\n"} {
		if _, err := Parse("plan.yaml", []byte(withSink(ok)), testOptions()); err != nil {
			t.Errorf("%s: %v", strings.TrimSpace(ok), err)
		}
	}
	// A trailing --- with nothing after it is one document.
	mustParse(t, minimalPlan+"---\n", testOptions())
}

// A key that cannot tell records of different partitions apart is warned
// about; a business key is not.
func TestKeyUniquenessWarnings(t *testing.T) {
	const file = "  type: file\n  path: out/orders.jsonl\n"
	tests := []struct {
		key, partitions string
		warn            bool
	}{
		{"{{ .Offset }}", "", true},
		{"o-{{ .Offset }}", "  partitions: [0, 1]\n", true},
		{"{{ .Offset }}", "  partitions: [3]\n", false},
		{"{{ .Partition }}-{{ .Offset }}", "", false},
		{"{{ .Value.id }}", "", false},
		{"constant", "", true},
	}
	for _, tt := range tests {
		src := strings.Replace(minimalPlan, file, file+"  key: '"+tt.key+"'\n", 1)
		src = strings.Replace(src, "  topic: orders\n", "  topic: orders\n"+tt.partitions, 1)
		var warned bool
		for _, w := range mustParse(t, src, testOptions()).Warnings() {
			warned = warned || w.Field == "sink.key"
		}
		if warned != tt.warn {
			t.Errorf("key %q partitions %q: warned %v, want %v", tt.key, strings.TrimSpace(tt.partitions), warned, tt.warn)
		}
	}
}

// "$(" in one value must not break the expansion of ${VAR} in a flow
// mapping elsewhere.
func TestEnvExpansionBesideDollarParen(t *testing.T) {
	src := strings.Replace(minimalPlan, "name: orders-fix\n", "name: orders-fix\ndescription: \"costs $(USD)\"\n", 1)
	src = strings.Replace(src, "  topic: orders\n", "  topic: orders\n  sasl: {mechanism: PLAIN, username: u, password: ${PW}}\n", 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { return "s3cret", k == "PW" }
	p := mustParse(t, src, opts)
	if p.Source.SASL.Password != "s3cret" || p.Description != "costs $(USD)" {
		t.Errorf("password %q, description %q", p.Source.SASL.Password, p.Description)
	}
}

// A throttle whose rate comes from an unset variable is a throttle:
// validate without the variable must not warn that there is none.
func TestUnsetThrottleVariableIsNotAMissingThrottle(t *testing.T) {
	const file = "  type: file\n  path: out/orders.jsonl\n"
	src := strings.Replace(minimalPlan, file, "  type: postgres\n  dsn: postgres://app@db/orders\n  table: t\n  overwrite: true\n", 1) +
		"throttle: {records_per_second: ${RATE}}\n"
	opts := testOptions()
	opts.AllowUnsetEnv = true
	opts.LookupEnv = func(string) (string, bool) { return "", false }
	for _, w := range mustParse(t, src, opts).Warnings() {
		t.Errorf("warning %s", w)
	}
	opts.LookupEnv = func(string) (string, bool) { return "0", true }
	var warned bool
	for _, w := range mustParse(t, src, opts).Warnings() {
		warned = warned || w.Field == "throttle"
	}
	if !warned {
		t.Error("RATE=0 is no throttle: want the warning")
	}
}
