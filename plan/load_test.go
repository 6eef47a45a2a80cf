package plan

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimalPlan = `version: 1
name: orders-fix
source:
  brokers: ["kafka-1:9092"]
  topic: orders
group: replay.orders-fix
window:
  from: -2h
sink:
  type: file
  path: out/orders.jsonl
`

func mustParse(t *testing.T, src string, opts LoadOptions) *Plan {
	t.Helper()
	p, err := Parse("plan.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return p
}

// parseProblems parses src, which must be invalid, and returns its error lines.
func parseProblems(t *testing.T, src string, opts LoadOptions) string {
	t.Helper()
	_, err := Parse("plan.yaml", []byte(src), opts)
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Parse: want *InvalidError, got %v", err)
	}
	return inv.Error()
}

func TestDefaults(t *testing.T) {
	p := mustParse(t, minimalPlan, testOptions())
	// on_conflict is a database sink's field (a file sink has none).
	db := mustParse(t, strings.Replace(minimalPlan, "  type: file\n", "  type: sqlite\n  table: orders\n  overwrite: true\n", 1)+"throttle: {records_per_second: 100}\n", testOptions())
	checks := []struct {
		field     string
		got, want any
	}{
		{"source.isolation", p.Source.Isolation, ReadCommitted},
		{"source.partitions.all", p.Source.Partitions.All, true},
		{"source.client_id", p.Source.ClientID, "replay"},
		{"on_error", p.OnError, OnErrorFail},
		{"sink.batch_size", p.Sink.BatchSize, DefaultBatchSize},
		{"sink.on_conflict", sinkValue(&db.Sink, "on_conflict"), "update"},
		{"DefaultBatchSize", DefaultBatchSize, 1000},
		{"allow_data_loss", p.AllowDataLoss, false},
		{"file", p.File, "plan.yaml"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
}

func TestDefaultsDoNotOverride(t *testing.T) {
	src := strings.Replace(minimalPlan, "  topic: orders\n", "  topic: orders\n  isolation: read_uncommitted\n  partitions: [2]\n", 1)
	// on_conflict applies to database sinks only: a sqlite sink takes it.
	src = strings.Replace(src, "  type: file\n", "  type: sqlite\n  table: orders\n", 1)
	src += "  batch_size: 10\n  on_conflict: ignore\non_error: skip\nthrottle: {records_per_second: 100}\n"
	p := mustParse(t, src, testOptions())
	if p.Source.Isolation != ReadUncommitted || p.Source.Partitions.All || p.Sink.BatchSize != 10 ||
		sinkValue(&p.Sink, "on_conflict") != "ignore" || p.OnError != OnErrorSkip {
		t.Errorf("defaults overrode the plan: %+v %+v %s", p.Source, p.Sink, p.OnError)
	}
}

// Regression: plain ${VAR} scalars were resolved as strings when parsed and
// kept that tag, so a number from the environment failed to decode
// ("want a number, got "2000"").
func TestEnvNumbersDecodeAsNumbers(t *testing.T) {
	src := minimalPlan + "  batch_size: ${BATCH}\nthrottle:\n  records_per_second: ${RATE}\n  bytes_per_second: ${BYTES}\n"
	opts := testOptions()
	env := map[string]string{"RATE": "2000", "BATCH": "250", "BYTES": "5MiB"}
	opts.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p := mustParse(t, src, opts)
	if p.Throttle.RecordsPerSecond != 2000 || p.Sink.BatchSize != 250 || p.Throttle.BytesPerSecond != 5<<20 {
		t.Errorf("throttle %+v, batch size %d", p.Throttle, p.Sink.BatchSize)
	}
	for _, f := range []string{"throttle.records_per_second", "sink.batch_size", "throttle.bytes_per_second"} {
		if !p.FromEnv(f) {
			t.Errorf("FromEnv(%q) = false", f)
		}
	}
	if p.FromEnv("source.topic") {
		t.Error(`FromEnv("source.topic") = true for a literal`)
	}
}

func TestEnvQuotedStaysString(t *testing.T) {
	src := strings.Replace(minimalPlan, "topic: orders", `topic: "${TOPIC}"`, 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { return "12345", k == "TOPIC" }
	if p := mustParse(t, src, opts); p.Source.Topic != "12345" {
		t.Errorf("topic = %q", p.Source.Topic)
	}
}

func TestEnvBrokersList(t *testing.T) {
	src := strings.Replace(minimalPlan, `brokers: ["kafka-1:9092"]`, "brokers: ${KAFKA_BROKERS}", 1)
	p := mustParse(t, src, testOptions())
	if got := strings.Join(p.Source.Brokers, "|"); got != "kafka-1:9092,kafka-2:9092" || !p.FromEnv("source.brokers") {
		t.Errorf("brokers = %q", got)
	}
	// A literal string is still not a list.
	src = strings.Replace(minimalPlan, `brokers: ["kafka-1:9092"]`, "brokers: kafka-1:9092", 1)
	want := `plan.yaml:4:12: source.brokers: want a list, got "kafka-1:9092": write it as a list, e.g. ["kafka-1:9092"]`
	if got := parseProblems(t, src, testOptions()); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestEnvMissingReportedWithPosition(t *testing.T) {
	src := strings.Replace(minimalPlan, "topic: orders", "topic: orders-${REGION}-${ENV}", 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { return "eu", k == "REGION" }
	want := "plan.yaml:5:10: source.topic: environment variable ENV is not set: export it before running replay"
	if got := parseProblems(t, src, opts); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestEnvEmptyIsAllowed(t *testing.T) {
	src := strings.Replace(minimalPlan, "name: orders-fix", "name: orders-fix${SUFFIX}", 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { return "", k == "SUFFIX" }
	p := mustParse(t, src, opts)
	if p.Name != "orders-fix" || !p.FromEnv("name") {
		t.Errorf("name = %q, FromEnv = %v", p.Name, p.FromEnv("name"))
	}
	// Allowed, but said: an unfilled variable silently changes the plan.
	var empty []Problem
	for _, w := range p.Warnings() {
		if strings.Contains(w.Message, "environment variable SUFFIX is set but empty") {
			empty = append(empty, w)
		}
	}
	if len(empty) != 1 || empty[0].Field != "name" || empty[0].Line != 2 {
		t.Errorf("want one warning about SUFFIX at name (line 2), got %v", p.Warnings())
	}
}

func TestEnvDSNPasswordFromVariable(t *testing.T) {
	src := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n",
		"  type: postgres\n  dsn: postgres://app:${PGPASSWORD}@${PGHOST}/orders\n  table: orders\n  overwrite: true\n", 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) { return "v", true }
	p := mustParse(t, src, opts)
	if dsn := sinkValue(&p.Sink, "dsn"); dsn != "postgres://app:v@v/orders" {
		t.Errorf("dsn = %q", dsn)
	}
	if len(p.Warnings()) != 1 || p.Warnings()[0].Field != "throttle" {
		t.Errorf("warnings = %v, want one about the missing throttle", p.Warnings())
	}
}

func TestPosition(t *testing.T) {
	p := mustParse(t, minimalPlan, testOptions())
	for field, want := range map[string]Pos{
		"version":           {1, 10},
		"source":            {4, 3},
		"source.topic":      {5, 10},
		"source.brokers[0]": {4, 13},
		"window.from":       {8, 9},
		"sink.path":         {11, 9},
		"throttle":          {},
	} {
		if got := p.Position(field); got != want {
			t.Errorf("Position(%q) = %s, want %s", field, got, want)
		}
	}
}

const indentHint = "check the indentation of this line: it must line up with the other keys of its mapping (or items of its list)"

func TestParseDocumentShape(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "plan.yaml:1:1: empty plan: see the plan reference in docs/plan.md"},
		{"comment only", "# nothing yet\n", "plan.yaml:1:1: empty plan: see the plan reference in docs/plan.md"},
		{"list", "- version: 1\n", "plan.yaml:1:1: a plan is a mapping (key: value lines), got a list"},
		{"scalar", "orders\n", `plan.yaml:1:1: a plan is a mapping (key: value lines), got "orders"`},
		// Regression: yaml.v3 reports a tab after a plain scalar at the
		// scalar's line, and says "found character that cannot start any
		// token" for a tab at the start of a block: say what is wrong, where.
		{"tab indentation", "version: 1\nname: x\n\tgroup: y\n", "plan.yaml:3:1: invalid YAML: line 3 is indented with a tab: YAML forbids tabs for indentation, indent with spaces"},
		{"tab in nested indentation", "version: 1\nsource:\n  topic: t\n\tbrokers: [a]\n", "plan.yaml:4:1: invalid YAML: line 4 is indented with a tab: YAML forbids tabs for indentation, indent with spaces"},
		{"tab after spaces", "version: 1\nsource:\n  topic: t\n  \tbrokers: [a]\n", "plan.yaml:4:1: invalid YAML: line 4 is indented with a tab: YAML forbids tabs for indentation, indent with spaces"},
		{"tab-indented comment", "version: 1\n\t# a comment\nname: x\n", "plan.yaml:2:1: invalid YAML: line 2 is indented with a tab: YAML forbids tabs for indentation, indent with spaces"},
		{"reserved character", "version: 1\nname: @x\n", "plan.yaml:2:1: invalid YAML: found character that cannot start any token: quote a value that starts with @ or `, which YAML reserves"},
		// Regression: yaml.v3 reports parser errors one line early.
		{"unclosed mapping", "version: 1\nsource: {topic: orders\ngroup: g\n", "plan.yaml:2:1: invalid YAML: did not find expected ',' or '}': a { mapping starting on this line is not closed: add the missing } (or a comma between entries)"},
		{"bad indentation", "version: 1\nsource:\n  topic: orders\n brokers: []\n", "plan.yaml:4:1: invalid YAML: did not find expected key: " + indentHint},
		// Regression: for a line indented deeper than its mapping, yaml.v3
		// reports where the mapping starts (line 3, and 2 before the +1).
		{"deeper indentation", "version: 1\nsource:\n  brokers: [a]\n   topic: orders\ngroup: g\n", "plan.yaml:4:1: invalid YAML: did not find expected key: " + indentHint},
		{"deeper indentation after a flow mapping", "version: 1\nsink: {type: file,\n  path: x}\nsource:\n  brokers: [a]\n   topic: orders\n", "plan.yaml:6:1: invalid YAML: did not find expected key: " + indentHint},
		{"nested mapping", "version: 1\nsink:\n  type: file\n  columns:\n    a: value\n   b: key\n", "plan.yaml:6:1: invalid YAML: did not find expected key: " + indentHint},
		{"list item", "version: 1\nsource:\n  brokers:\n    - a\n    - b\n   - c\n", "plan.yaml:6:1: invalid YAML: did not find expected key: " + indentHint},
		{"key after a list item", "version: 1\nbrokers:\n  - a\n  topic: t\n", "plan.yaml:4:1: invalid YAML: did not find expected '-' indicator: check the indentation of this line: the list above expects another - item here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseProblems(t, tt.src, testOptions())
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestInvalidErrorLists(t *testing.T) {
	src := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n",
		"  type: postgres\n  dsn: ${ORDERS_DSN}\n  table: orders\n  on_conflict: ignore\n", 1) + "on_error: oops\n"
	_, err := Parse("plan.yaml", []byte(src), testOptions())
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("want *InvalidError, got %v", err)
	}
	if len(inv.Errors()) != 1 || len(inv.Problems) != 2 {
		t.Fatalf("problems = %v", inv.Problems)
	}
	if strings.Contains(inv.Error(), "warning") {
		t.Errorf("Error() shows warnings:\n%s", inv.Error())
	}
	// The missing throttle is reported where the sink is written.
	if !inv.Problems[0].Warning || !strings.HasPrefix(inv.Problems[0].String(), "plan.yaml:10:9: warning: throttle: ") {
		t.Errorf("first problem = %s", inv.Problems[0])
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/no-such-plan.yaml", testOptions())
	var inv *InvalidError
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &inv) {
		t.Errorf("Load(missing file) = %v, want a wrapped fs.ErrNotExist", err)
	}
}

// Regression: `sasl: {password: ${PW}}` (a flow mapping, as plans write it) did not
// parse, because "{" and "}" are YAML flow indicators.
func TestEnvInFlowMapping(t *testing.T) {
	src := strings.Replace(minimalPlan, "source:\n", "source:\n  sasl: {mechanism: SCRAM-SHA-512, username: ${KUSER}, password: ${KPASS}}\n", 1)
	opts := testOptions()
	opts.LookupEnv = func(k string) (string, bool) {
		return map[string]string{"KUSER": "replay", "KPASS": "s3cret"}[k], k == "KUSER" || k == "KPASS"
	}
	p, err := Parse("plan.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.SASL.Username != "replay" || p.Source.SASL.Password != "s3cret" || !p.FromEnv("source.sasl.password") {
		t.Fatalf("sasl = %+v", p.Source.SASL)
	}
}

// Regression: a quoted partition key ("0": ...) is a partition number as
// a person means it; it was rejected, with a spurious "window: missing".
func TestOffsetsQuotedPartitionKey(t *testing.T) {
	src := strings.Replace(minimalPlan, "  from: -2h\n", "  offsets:\n    \"0\": {from: 0, to: 10}\n    '3': {from: earliest, to: latest}\n    5: {from: 2, to: 4}\n", 1)
	p := mustParse(t, src, testOptions())
	if len(p.Window.Offsets) != 3 || p.Window.Offsets[0].To.Offset != 10 || !p.Window.Offsets[3].To.Latest || p.Window.Offsets[5].From.Offset != 2 {
		t.Errorf("offsets %+v", p.Window.Offsets)
	}
	if pos := p.Position("window.offsets.0"); pos.Line != 9 {
		t.Errorf("window.offsets.0 at %v, want line 9", pos)
	}
}

// TestEnvUnsetOffline: with AllowUnsetEnv, an unset variable is no
// problem: the fields holding it are not checked, the others are, and
// UnsetEnv lists the variables.
func TestEnvUnsetOffline(t *testing.T) {
	src := strings.Replace(minimalPlan, `brokers: ["kafka-1:9092"]`, "brokers: ${KAFKA_BROKERS}", 1)
	src = strings.Replace(src, "path: out/orders.jsonl", "path: ${OUT_DIR}/orders.jsonl", 1)
	opts := testOptions()
	opts.LookupEnv = func(string) (string, bool) { return "", false }
	opts.AllowUnsetEnv = true
	p := mustParse(t, src, opts)
	if got := strings.Join(p.UnsetEnv(), ","); got != "KAFKA_BROKERS,OUT_DIR" {
		t.Errorf("UnsetEnv = %q", got)
	}
	// Another field's problem is still found, with the variables listed.
	bad := strings.Replace(src, "from: -2h", "from: -2x", 1)
	_, err := Parse("plan.yaml", []byte(bad), opts)
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Problems) != 1 || inv.Problems[0].Field != "window.from" || strings.Join(inv.UnsetEnv, ",") != "KAFKA_BROKERS,OUT_DIR" {
		t.Errorf("want only the window.from problem with the variables, got %v (unset %v)", err, inv)
	}
	// Without AllowUnsetEnv both are problems, as before.
	opts.AllowUnsetEnv = false
	got := parseProblems(t, src, opts)
	if !strings.Contains(got, "environment variable KAFKA_BROKERS is not set") || !strings.Contains(got, "environment variable OUT_DIR is not set") {
		t.Errorf("without AllowUnsetEnv: %s", got)
	}
}

// A plan file larger than MaxPlanBytes (a wrong file, /dev/zero) is
// refused after reading at most MaxPlanBytes+1 bytes of it.
func TestLoadRefusesAHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, bytes.Repeat([]byte("#\n"), MaxPlanBytes/2+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, testOptions())
	if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("Load of a %d-byte file: %v, want the size refusal", MaxPlanBytes+2, err)
	}
}

// A throttle that did not decode is reported once, as an error, and the
// missing-throttle warning of a database sink neither goes missing nor
// turns the problem reported before it into a warning.
func TestUndecodedThrottleKeepsOtherProblems(t *testing.T) {
	pg := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n",
		"  type: postgres\n  dsn: postgres://app@db/orders\n  table: orders\n  overwrite: true\n", 1) + "throttle: 5\n"
	want := `plan.yaml:14:11: throttle: want a mapping (key: value lines), got "5"`
	if got := parseProblems(t, pg, testOptions()); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	src := strings.Replace(pg, `brokers: ["kafka-1:9092"]`, `brokers: ["kafka-1"]`, 1)
	_, err := Parse("plan.yaml", []byte(src), testOptions())
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Parse: want *InvalidError, got %v", err)
	}
	var brokers []Problem
	for _, pr := range inv.Problems {
		if pr.Field == "source.brokers[0]" {
			brokers = append(brokers, pr)
		}
	}
	if len(brokers) != 1 || brokers[0].Warning {
		t.Errorf("want one error (not a warning) at source.brokers[0], got %v", inv.Problems)
	}
}

// A partition key of window.offsets is a decimal number: YAML's other
// number forms (010 is 8, 1.0 and 1e0 are 1, 0x2 is 2, ~ is 0) are refused,
// and two keys naming one partition are a duplicate, not a range lost.
func TestOffsetsPartitionKeysAreDecimal(t *testing.T) {
	for key, want := range map[string]string{
		"010": `key "010": want a partition number`, "1.0": `key "1.0": want a partition number`,
		"1e0": `key "1e0": want a partition number`, "0x2": `key "0x2": want a partition number`,
		"~": `want a partition number`, "' 3'": "duplicate key (first set at line 9)",
	} {
		src := strings.Replace(minimalPlan, "  from: -2h\n", "  offsets:\n    3: {from: 0, to: 10}\n    "+key+": {from: 5, to: 6}\n", 1)
		if got := parseProblems(t, src, testOptions()); !strings.Contains(got, want) {
			t.Errorf("key %s: got %s\nwant %q", key, got, want)
		}
	}
}

// A whole-number field refuses a number with a fraction (YAML would cut
// 10.7 to 10, and 0.9 to 0), from the file or the environment, and a byte
// size of less than one byte is refused (0.5 was 0: no limit).
func TestWholeNumbersAreNotCut(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"version: 1", "version: 1.9", `version: want a whole number, got "1.9"`},
		{"  path: out/orders.jsonl\n", "  path: out/orders.jsonl\n  batch_size: 10.7\n", `sink.batch_size: want a whole number, got "10.7"`},
		{"  path: out/orders.jsonl\n", "  path: out/orders.jsonl\n  batch_size: ${BATCH}\n", `sink.batch_size: want a whole number`},
		{"  from: -2h\n", "  from: -2h\nthrottle: {bytes_per_second: 0.5}\n", `throttle.bytes_per_second: byte size "0.5" is less than one byte`},
	} {
		opts := testOptions()
		opts.LookupEnv = func(k string) (string, bool) { return "10.5", k == "BATCH" }
		if got := parseProblems(t, strings.Replace(minimalPlan, tc.old, tc.new, 1), opts); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %s\nwant %q", strings.TrimSpace(tc.new), got, tc.want)
		}
	}
	p := mustParse(t, strings.Replace(minimalPlan, "  from: -2h\n", "  from: -2h\nthrottle: {bytes_per_second: 1.5KiB}\n", 1), testOptions())
	if p.Throttle.BytesPerSecond != 1536 {
		t.Errorf("1.5KiB = %d bytes, want 1536", p.Throttle.BytesPerSecond)
	}
}

// A relative time or duration with days is read as written or refused:
// no sign inside ("-1d-2h" was 22 hours ago), and no day count past what a
// duration holds (-213504d wrapped around to 25 minutes ago).
func TestDurationsWithDays(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"  from: -2h\n", "  from: -1d-2h\n", `window.from: relative time "-1d-2h"`},
		{"  from: -2h\n", "  from: --2h\n", `window.from: relative time "--2h"`},
		{"  from: -2h\n", "  from: -213504d\n", `is too long`},
		{"  from: -2h\n", "  from: -2h\nretry: {max_elapsed: 213504d}\n", `retry.max_elapsed: bad duration "213504d"`},
		{"  from: -2h\n", "  from: -2h\nretry: {max_elapsed: ~}\n", `retry.max_elapsed: empty: give a value, or drop the line`},
		{"  from: -2h\n", "  from: -2h\nthrottle: {bytes_per_second: }\n", `throttle.bytes_per_second: empty`},
	} {
		if got := parseProblems(t, strings.Replace(minimalPlan, tc.old, tc.new, 1), testOptions()); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %s\nwant %q", strings.TrimSpace(tc.new), got, tc.want)
		}
	}
	p := mustParse(t, strings.Replace(minimalPlan, "  from: -2h\n", "  from: -1d2h\n", 1), testOptions())
	if now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC); !p.Window.From.At(now).Equal(now.Add(-26 * time.Hour)) {
		t.Errorf("-1d2h at %s is %s, want 26 hours before", now, p.Window.From.At(now))
	}
}

// A value under a !!binary or a local tag is refused: the first is base64
// a reviewer cannot read, the second was ignored.
func TestTaggedValuesRefused(t *testing.T) {
	for tagged, want := range map[string]string{
		"filter: !!binary dmFsdWUuc3RhdHVzICE9ICJwYWlkIg==\n": "filter: tag !!binary: a plan holds plain values",
		"filter: !custom 'true'\n":                            "filter: tag !custom",
	} {
		if got := parseProblems(t, minimalPlan+tagged, testOptions()); !strings.Contains(got, want) {
			t.Errorf("%s: got %s\nwant %q", strings.TrimSpace(tagged), got, want)
		}
	}
	mustParse(t, strings.Replace(minimalPlan, "name: orders-fix", "name: !!str orders-fix", 1), testOptions())
}

// A broker address without a port is shown with one; an IPv6 address in
// the brackets host:port needs.
func TestBrokerPortHints(t *testing.T) {
	for broker, want := range map[string]string{
		"kafka-1":       `"kafka-1" is not host:port: add the port, e.g. "kafka-1:9092"`,
		"::1:9092":      `e.g. "[::1]:9092"`,
		"2001:db8::1":   `e.g. "[2001:db8::1]:9092"`,
		"[2001:db8::1]": `e.g. "[2001:db8::1]:9092"`,
	} {
		src := strings.Replace(minimalPlan, `brokers: ["kafka-1:9092"]`, `brokers: ["`+broker+`"]`, 1)
		if got := parseProblems(t, src, testOptions()); !strings.Contains(got, want) {
			t.Errorf("%s: got %s\nwant %q", broker, got, want)
		}
	}
}
