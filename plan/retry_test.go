package plan

import (
	"strings"
	"testing"
	"time"
)

// TestRetry: retry.max_elapsed defaults to 5m when absent, keeps a written
// 0s (fail at the first broker error), refuses more than 24h and a
// bare number, and leaves the fingerprint alone.
func TestRetry(t *testing.T) {
	if got := time.Duration(mustParse(t, minimalPlan, LoadOptions{Sinks: testSinks}).Retry.MaxElapsed); got != DefaultRetryMaxElapsed {
		t.Errorf("default max_elapsed %s, want %s", got, DefaultRetryMaxElapsed)
	}
	if got := mustParse(t, minimalPlan+"retry: {max_elapsed: 0s}\n", LoadOptions{Sinks: testSinks}).Retry.MaxElapsed; got != 0 {
		t.Errorf("written 0s became %s", time.Duration(got))
	}
	if got := time.Duration(mustParse(t, minimalPlan+"retry: {max_elapsed: 90s}\n", LoadOptions{Sinks: testSinks}).Retry.MaxElapsed); got != 90*time.Second {
		t.Errorf("90s became %s", got)
	}
	for src, want := range map[string]string{
		"retry: {max_elapsed: 25h}\n": "retry.max_elapsed: 25h0m0s is above the limit of 24h",
		"retry: {max_elapsed: 300}\n": "has no unit",
		"retry: {max_retries: 3}\n":   "max_retries",
	} {
		if got := parseProblems(t, minimalPlan+src, LoadOptions{Sinks: testSinks}); !strings.Contains(got, want) {
			t.Errorf("%q: problems %q, want %q", src, got, want)
		}
	}
	a := mustParse(t, minimalPlan, LoadOptions{Sinks: testSinks}).Fingerprint()
	if b := mustParse(t, minimalPlan+"retry: {max_elapsed: 1h}\n", LoadOptions{Sinks: testSinks}).Fingerprint(); a != b {
		t.Errorf("retry changed the fingerprint: %s != %s", a, b)
	}
}

// TestOpenTransactionTimeout: source.open_transaction_timeout defaults to
// 5m when absent, keeps a written 0s (fail at once), refuses more than 24h,
// warns under read_uncommitted (nothing waits there), and leaves the
// fingerprint alone.
func TestOpenTransactionTimeout(t *testing.T) {
	withTimeout := func(v string) string {
		return strings.Replace(minimalPlan, "  topic: orders\n", "  topic: orders\n  open_transaction_timeout: "+v+"\n", 1)
	}
	if got := time.Duration(mustParse(t, minimalPlan, LoadOptions{Sinks: testSinks}).Source.OpenTransactionTimeout); got != DefaultOpenTransactionTimeout {
		t.Errorf("default %s, want %s", got, DefaultOpenTransactionTimeout)
	}
	if got := mustParse(t, withTimeout("0s"), LoadOptions{Sinks: testSinks}).Source.OpenTransactionTimeout; got != 0 {
		t.Errorf("written 0s became %s", time.Duration(got))
	}
	if got := time.Duration(mustParse(t, withTimeout("30s"), LoadOptions{Sinks: testSinks}).Source.OpenTransactionTimeout); got != 30*time.Second {
		t.Errorf("30s became %s", got)
	}
	for src, want := range map[string]string{
		withTimeout("25h"): "source.open_transaction_timeout: 25h0m0s is above the limit of 24h",
		withTimeout("300"): "has no unit",
	} {
		if got := parseProblems(t, src, LoadOptions{Sinks: testSinks}); !strings.Contains(got, want) {
			t.Errorf("%q: problems %q, want %q", src, got, want)
		}
	}
	p := mustParse(t, strings.Replace(withTimeout("1m"), "  topic: orders\n", "  topic: orders\n  isolation: read_uncommitted\n", 1), LoadOptions{Sinks: testSinks})
	if ws := p.Warnings(); len(ws) != 1 || ws[0].Field != "source.open_transaction_timeout" {
		t.Errorf("read_uncommitted: warnings %v, want one at source.open_transaction_timeout", ws)
	}
	a := mustParse(t, minimalPlan, LoadOptions{Sinks: testSinks}).Fingerprint()
	if b := mustParse(t, withTimeout("1h"), LoadOptions{Sinks: testSinks}).Fingerprint(); a != b {
		t.Errorf("open_transaction_timeout changed the fingerprint: %s != %s", a, b)
	}
}

// TestSinkRetry: sink.retry.max_elapsed (and the dead-letter sink's)
// defaults to 5m when absent, keeps a written 0s, refuses more than 24h and
// a negative duration, is taken by every sink type, and leaves the
// fingerprint alone.
func TestSinkRetry(t *testing.T) {
	p := mustParse(t, minimalPlan, LoadOptions{Sinks: testSinks})
	if got := time.Duration(p.Sink.Retry.MaxElapsed); got != DefaultSinkRetryMaxElapsed {
		t.Errorf("default sink.retry.max_elapsed %s, want %s", got, DefaultSinkRetryMaxElapsed)
	}
	dl := minimalPlan + "on_error: dead_letter\ndead_letter: {type: file, path: out/dead.jsonl}\n"
	if got := time.Duration(mustParse(t, dl, LoadOptions{Sinks: testSinks}).DeadLetter.Retry.MaxElapsed); got != DefaultSinkRetryMaxElapsed {
		t.Errorf("default dead_letter.retry.max_elapsed %s, want %s", got, DefaultSinkRetryMaxElapsed)
	}
	if got := mustParse(t, minimalPlan+"  retry: {max_elapsed: 0s}\n", LoadOptions{Sinks: testSinks}).Sink.Retry.MaxElapsed; got != 0 {
		t.Errorf("written 0s became %s", time.Duration(got))
	}
	if got := time.Duration(mustParse(t, minimalPlan+"  retry: {max_elapsed: 20m}\n", LoadOptions{Sinks: testSinks}).Sink.Retry.MaxElapsed); got != 20*time.Minute {
		t.Errorf("20m became %s", got)
	}
	for src, want := range map[string]string{
		"  retry: {max_elapsed: 25h}\n": "sink.retry.max_elapsed: 25h0m0s: want a duration up to 24h",
		"  retry: {max_elapsed: -1s}\n": "sink.retry.max_elapsed: bad duration",
		"  retry: {attempts: 3}\n":      "attempts",
	} {
		if got := parseProblems(t, minimalPlan+src, LoadOptions{Sinks: testSinks}); !strings.Contains(got, want) {
			t.Errorf("%q: problems %q, want %q", src, got, want)
		}
	}
	a := p.Fingerprint()
	if b := mustParse(t, minimalPlan+"  retry: {max_elapsed: 1h}\n", LoadOptions{Sinks: testSinks}).Fingerprint(); a != b {
		t.Errorf("sink.retry changed the fingerprint: %s != %s", a, b)
	}
}
