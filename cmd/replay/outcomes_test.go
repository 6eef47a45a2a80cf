package main

import (
	"strings"
	"testing"

	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks"
)

// The summary says what a sink that can tell did with the records, and
// nothing for one that cannot.
func TestPrintOutcomes(t *testing.T) {
	var b strings.Builder
	printOutcomes(&b, "sink", nil)
	if b.Len() != 0 {
		t.Fatalf("a sink without outcomes printed %q", b.String())
	}
	printOutcomes(&b, "sink", &sinks.Outcomes{Unchanged: 6, Stale: 2})
	if got, want := b.String(), "sink: 0 inserted, 0 updated, 6 unchanged, 0 ignored, 2 stale\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	b.Reset()
	printOutcomes(&b, "sink", &sinks.Outcomes{Inserted: 3, Collisions: 3, FirstCollision: "orders/0/1 and orders/1/1: key 1"})
	if !strings.Contains(b.String(), "3 records shared an idempotency key") || !strings.Contains(b.String(), "orders/0/1 and orders/1/1: key 1") {
		t.Errorf("collision warning missing or without the pair:\n%s", b.String())
	}
}

// A run that stopped before its sink published says what readers see of
// its output, as its sink type has it: the file sink nothing, the parquet
// sink the objects finished so far and no manifest yet.
func TestPrintReportUnpublished(t *testing.T) {
	for typ, want := range map[string]string{
		"file":    "; not published: the output appears when the run completes\n",
		"parquet": "; not complete: the objects finished so far are published (each when it holds max_rows_per_file rows or the end of its range), _manifest.json only when the run completes",
	} {
		var b strings.Builder
		printReport(&b, &runner.Report{Sink: typ}, "out/")
		if !strings.Contains(b.String(), "records written to the staging of out/") || !strings.Contains(b.String(), want) {
			t.Errorf("%s sink, stopped before publishing:\n%s\nwant it to say %q", typ, b.String(), want)
		}
	}
}
