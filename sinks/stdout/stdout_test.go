package stdout_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/stdout"
)

// stdoutHarness runs the conformance suite on the stdout sink. A stream
// cannot take back what it printed, so a re-delivered record is printed
// again: the stdout sink is at-least-once (Features.Duplicates), and its
// contents are every line printed (each line is a deterministic function
// of the record, so a duplicate is byte-identical). TestStdoutPrintsEachRecordOnce
// checks that a clean run prints every record exactly once.
type stdoutHarness struct {
	bufs sinktest.Targets[*testenv.Buffer]
}

func (h *stdoutHarness) buf(t *testing.T) *testenv.Buffer {
	return h.bufs.Get(t, func() *testenv.Buffer { return &testenv.Buffer{} })
}

func (h *stdoutHarness) New(t *testing.T) sinks.Sink { return stdout.New(h.buf(t)) }

func (h *stdoutHarness) Contents(t *testing.T) []string {
	var out []string
	for _, line := range bytes.SplitAfter(h.buf(t).Bytes(), []byte("\n")) {
		if len(line) > 0 {
			out = append(out, storedLines(t, line)...)
		}
	}
	return out
}

func (h *stdoutHarness) Records(t *testing.T) []record.Record {
	return sinktest.DecodeLines(t, h.buf(t).Bytes())
}

// The suite compares the distinct lines only where it re-delivers
// (Duplicates): a record printed twice in a clean run fails it.
func TestStdoutConformance(t *testing.T) {
	sinktest.RunWith(t, &stdoutHarness{}, sinktest.Features{Durable: sinktest.OnWrite, Duplicates: true, Contents: true})
}

// A clean run prints each record exactly once, in the order written.
func TestStdoutPrintsEachRecordOnce(t *testing.T) {
	var buf testenv.Buffer
	s := stdout.New(&buf)
	var recs []record.Record
	for i := range 50 {
		recs = append(recs, record.Record{Topic: "orders", Partition: 1, Offset: int64(100 + i), Value: []byte(`{"i":1}`)})
	}
	if err := s.Write(context.Background(), recs[:20]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), recs[20:]); err != nil {
		t.Fatal(err)
	}
	got := storedLines(t, buf.Bytes())
	if len(got) != 50 {
		t.Fatalf("printed %d lines, want 50", len(got))
	}
}
