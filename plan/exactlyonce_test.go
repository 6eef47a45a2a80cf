package plan

import (
	"strings"
	"testing"
)

const kafkaPlan = `version: 1
name: orders-mirror
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-mirror
window: {from: 2026-11-03T10:00:00Z}
throttle: {records_per_second: 1000}
sink:
  type: kafka
  brokers: ["kafka-1:9092"]
  topic: orders-fixed
`

// exactly_once and transactional_id: where they apply and with what.
func TestExactlyOnceValidation(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        string // "" for valid
	}{
		{"exactly_once", "  exactly_once: true\n", ""},
		{"with transactional_id", "  exactly_once: true\n  transactional_id: replay-orders.v2\n", ""},
		{"transactional_id alone", "  transactional_id: replay-orders\n", "sink.transactional_id: only applies with exactly_once: true"},
		{"bad transactional_id", "  exactly_once: true\n  transactional_id: 'has space'\n", `sink.transactional_id: "has space": want up to 200`},
		{"with dead letters", "  exactly_once: true\non_error: dead_letter\ndead_letter: {type: file, path: dl.jsonl}\n", "sink.exactly_once: not with on_error: dead_letter"},
		{"on a dead-letter sink", "on_error: dead_letter\ndead_letter: {type: kafka, brokers: [\"k:9092\"], topic: dl, exactly_once: true}\n", "dead_letter.exactly_once: a dead-letter sink is written after the sink's transaction"},
		{"on a file sink", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := kafkaPlan + tc.extra
			if tc.name == "on a file sink" {
				src = strings.Replace(kafkaPlan, "type: kafka\n  brokers: [\"kafka-1:9092\"]\n  topic: orders-fixed", "type: file\n  path: o.jsonl\n  exactly_once: true", 1)
				tc.want = "sink.exactly_once: does not apply to a file sink (only kafka sinks take it)"
			}
			_, err := Parse("plan.yaml", []byte(src), testOptions())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// exactly_once is part of the fingerprint (consumers rely on what it
// promises: a resumed run must keep it); transactional_id is not.
func TestExactlyOnceFingerprint(t *testing.T) {
	fp := func(extra string) string {
		p, err := Parse("plan.yaml", []byte(kafkaPlan+extra), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		return p.Fingerprint()
	}
	base, eos, named := fp(""), fp("  exactly_once: true\n"), fp("  exactly_once: true\n  transactional_id: other\n")
	if base == eos {
		t.Error("exactly_once does not change the fingerprint")
	}
	if eos != named {
		t.Error("transactional_id changes the fingerprint")
	}
}
