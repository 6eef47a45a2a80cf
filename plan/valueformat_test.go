package plan

import (
	"strings"
	"testing"
)

const valueFormatPlan = `version: 1
name: orders-out
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-out
window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T11:00:00Z}
sink:
  type: file
  path: out/orders.jsonl
`

// value_format is checked where a sink type takes it, and changes the
// fingerprint (a resumed run must write values in the same form) unless
// it is the default, auto.
func TestValueFormat(t *testing.T) {
	parse := func(extra string) (*Plan, error) {
		return Parse("plan.yaml", []byte(valueFormatPlan+extra), testOptions())
	}
	base, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra, wantErr string
		changes        bool
	}{
		{"  value_format: auto\n", "", false},
		{"  value_format: base64\n", "", true},
		{"  value_format: json\n", "", true},
		{"  value_format: bas64\n", `sink.value_format: "bas64" is not one of auto, json, text, base64 (did you mean "base64"?)`, false},
		{"  format: csv\n  columns: {o: offset}\n  value_format: text\n", "sink.value_format: applies to format: jsonl only", false},
	} {
		p, err := parse(tc.extra)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.extra, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		if changed := p.Fingerprint() != base.Fingerprint(); changed != tc.changes {
			t.Errorf("%q: fingerprint changed %v, want %v", tc.extra, changed, tc.changes)
		}
	}
	doc := strings.Replace(valueFormatPlan, "type: file\n  path: out/orders.jsonl", "type: sqlite\n  path: o.db\n  table: t", 1)
	if _, err := Parse("plan.yaml", []byte(doc+"  value_format: json\n"), testOptions()); err == nil || !strings.Contains(err.Error(), "value_format") {
		t.Errorf("sqlite with value_format: %v, want it refused", err)
	}
}

// A window bound finer than a millisecond is refused with the two nearest
// millisecond forms: Kafka timestamps are milliseconds.
func TestWindowBoundFinerThanMillisecond(t *testing.T) {
	doc := strings.Replace(valueFormatPlan, "to: 2026-11-03T11:00:00Z", "to: 2026-11-03T11:00:00.0005Z", 1)
	_, err := Parse("plan.yaml", []byte(doc), testOptions())
	want := `"2026-11-03T11:00:00.0005Z" is finer than a millisecond, the precision of Kafka timestamps: write 2026-11-03T11:00:00.000Z or 2026-11-03T11:00:00.001Z`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	doc = strings.Replace(valueFormatPlan, "to: 2026-11-03T11:00:00Z", "to: 2026-11-03T12:00:00.123000+01:00", 1)
	if _, err := Parse("plan.yaml", []byte(doc), testOptions()); err != nil {
		t.Fatalf("a whole millisecond written with more digits: %v", err)
	}
}
