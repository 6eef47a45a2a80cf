package plan

import (
	"strings"
	"testing"
	"time"
)

// The semantic throttle checks are warnings: a database or HTTP sink
// without a throttle, and a rate spread over more listed partitions than
// it has records per max_batch_wait. A batch larger than a second of the
// throttle is not: writes are cut to the throttle's share.
func TestThrottleWarnings(t *testing.T) {
	file := "  type: file\n  path: out/orders.jsonl\n"
	tests := []struct {
		name, sink, throttle string
		want                 []string // "field at line:col"
	}{
		{"postgres unthrottled", "  type: postgres\n  dsn: postgres://app@db/orders\n  table: orders\n", "", []string{"throttle at 10:9"}},
		{"sqlite unthrottled", "  type: sqlite\n  path: out/orders.db\n  table: orders\n", "", []string{"throttle at 10:9"}},
		{"http unthrottled", "  type: http\n  url: https://svc.internal/orders\n", "", []string{"throttle at 10:9"}},
		{"postgres zero throttle", "  type: postgres\n  dsn: postgres://app@db/orders\n  table: orders\n", "throttle: {records_per_second: 0}\n", []string{"throttle at 13:11"}},
		{"postgres throttled by bytes", "  type: postgres\n  dsn: postgres://app@db/orders\n  table: orders\n", "throttle: {bytes_per_second: 1MiB}\n", nil},
		{"file unthrottled", file, "", nil},
		{"batch above a second of throttle", file, "throttle: {records_per_second: 200}\n", nil},
		{"batch within a second of throttle", file + "  batch_size: 200\n", "throttle: {records_per_second: 200}\n", nil},
		{"rate below one record per partition per max_batch_wait", file, "throttle: {records_per_second: 2}\n", nil}, // partitions unknown: the run warns
		{"listed partitions, rate too thin", file, "throttle: {records_per_second: 2}\n", []string{"throttle.records_per_second at 13:32"}},
		{"listed partitions, longer max_batch_wait", file, "throttle: {records_per_second: 2, max_batch_wait: 2s}\n", nil},
		{"listed partitions, rate enough", file, "throttle: {records_per_second: 3}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(minimalPlan, file, tt.sink, 1) + tt.throttle
			if strings.HasPrefix(tt.name, "listed partitions") {
				src = strings.Replace(src, "  topic: orders\n", "  topic: orders\n  partitions: [0, 1, 2]\n", 1)
			}
			var got []string
			for _, w := range mustParse(t, src, testOptions()).Warnings() {
				if w.Field == "sink.on_conflict" {
					continue // the upsert warning, tested on its own
				}
				got = append(got, w.Field+" at "+Pos{w.Line, w.Col}.String())
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("warnings %v, want %v", got, tt.want)
			}
		})
	}
}

// Regression: any rate passed (records_per_second: 99999999999999999999999
// showed as 1e+23 records/s); rates are bounded, .nan and .inf included.
func TestThrottleBounds(t *testing.T) {
	for _, tc := range []struct{ throttle, want string }{
		{"{records_per_second: 1000000000}", ""},
		{"{bytes_per_second: 1024GiB}", ""},
		{"{records_per_second: 1000000001}", "throttle.records_per_second: 1.000000001e+09 is above the limit of 1000000000 (1e9)"},
		{"{records_per_second: .inf}", "throttle.records_per_second: +Inf is above the limit"},
		{"{records_per_second: .nan}", "throttle.records_per_second: not a number"},
		{"{bytes_per_second: 1099511627777}", "throttle.bytes_per_second: 1099511627777 bytes is above the limit of 1024GiB"},
	} {
		_, err := Parse("plan.yaml", []byte(minimalPlan+"throttle: "+tc.throttle+"\n"), testOptions())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.throttle, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.throttle, err, tc.want)
		}
	}
}

// max_batch_wait defaults to 1s, keeps what is written within 10ms..1h
// and refuses the rest; it leaves the fingerprint alone.
func TestMaxBatchWait(t *testing.T) {
	if got := time.Duration(mustParse(t, minimalPlan, testOptions()).Throttle.MaxBatchWait); got != DefaultMaxBatchWait {
		t.Errorf("default max_batch_wait %s, want %s", got, DefaultMaxBatchWait)
	}
	if got := time.Duration(mustParse(t, minimalPlan+"throttle: {records_per_second: 10, max_batch_wait: 250ms}\n", testOptions()).Throttle.MaxBatchWait); got != 250*time.Millisecond {
		t.Errorf("250ms became %s", got)
	}
	for src, want := range map[string]string{
		"throttle: {max_batch_wait: 0s}\n":  "throttle.max_batch_wait: 0s: want a duration from 10ms to 1h",
		"throttle: {max_batch_wait: 2h}\n":  "throttle.max_batch_wait: 2h0m0s: want a duration from 10ms to 1h",
		"throttle: {max_batch_wait: -1s}\n": "throttle.max_batch_wait: bad duration",
		"throttle: {max_batch_wait: 5}\n":   "has no unit",
	} {
		if got := parseProblems(t, minimalPlan+src, testOptions()); !strings.Contains(got, want) {
			t.Errorf("%q: problems %q, want %q", src, got, want)
		}
	}
	a := mustParse(t, minimalPlan, testOptions()).Fingerprint()
	if b := mustParse(t, minimalPlan+"throttle: {max_batch_wait: 5s}\n", testOptions()).Fingerprint(); a != b {
		t.Errorf("max_batch_wait changed the fingerprint: %s != %s", a, b)
	}
}
