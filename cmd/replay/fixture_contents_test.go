package main

import (
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// A sink's line is a fixture line: replay test reads each record of the
// contents corpus, written by AppendJSONL (and as a dead letter), back to
// its original bytes.
func TestFixtureReadsSinkLines(t *testing.T) {
	for _, r := range sinktest.Corpus() {
		for _, line := range [][]byte{encode.AppendJSONL(nil, &r), encode.AppendJSONL(nil, new(record.DeadLetter(r, "filter: boom")))} {
			fx, err := parseFixture(line[:len(line)-1], "other", 99)
			if err != nil {
				t.Fatalf("offset %d: %v", r.Offset, err)
			}
			fx.rec.Note = nil
			sinktest.CompareContents(t, fx.rec, r)
		}
	}
}
