// Package stdout is the sink that prints records as JSON lines to a
// stream, for previews and pipes.
package stdout

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Sink writes records as JSONL (see encode.AppendJSONL) to a stream, for previews
// and pipes. It cannot take back what it printed, so a resumed run may print
// a record twice: use it for looking, not for delivery.
type Sink struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	// Format is how values are written (the plan's value_format); "" is auto.
	Format encode.ValueFormat
}

var _ sinks.Sink = (*Sink)(nil)

// Capabilities: stdout offers nothing beyond Write.
func (s *Sink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// New returns a sink writing to w (os.Stdout when nil).
func New(w io.Writer) *Sink {
	if w == nil {
		w = os.Stdout
	}
	return &Sink{w: w}
}

// Write prints batch, one JSON object per line.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := encode.CheckBatch(batch, s.Format); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	for i := range batch {
		s.buf = encode.AppendJSONLChecked(s.buf, &batch[i], s.Format)
	}
	_, err := s.w.Write(s.buf)
	return err
}

// Finish does nothing: every Write is already printed.
func (s *Sink) Finish(context.Context) error { return nil }

// Close does nothing.
func (s *Sink) Close() error { return nil }

// Type is the stdout sink's type in a plan.
const Type plan.SinkType = "stdout"

// Section is a stdout sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	ValueFormat string `yaml:"value_format"`
}

// Descriptor describes the stdout sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:             Type,
	Summary:          "JSONL on standard output, for previews and pipes",
	NewConfig:        func() any { return new(Section) },
	Fields:           []plan.FieldDescriptor{encode.ValueFormatField},
	WritesStdout:     true,
	DeadLetterInLine: func(*plan.Sink) bool { return true },
	Check:            func(c *plan.SinkCheck) { encode.CheckDecodedValueFormat(c, plan.ConfigOf[Section](c.Sink).ValueFormat) },
}

// Open builds the stdout sink of a plan section of type stdout (its
// value_format): it writes to sp.Options.Stdout (nil: os.Stdout). It does
// not fail.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	s := New(sp.Options.Stdout)
	s.Format = encode.ValueFormat(plan.ConfigOf[Section](&sp.Plan).ValueFormat)
	return s, nil
}
