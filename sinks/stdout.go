package sinks

import (
	"context"
	"io"
	"os"
	"sync"
)

// Stdout writes records as JSONL (see AppendJSONL) to a stream, for previews
// and pipes. It cannot take back what it printed, so a resumed run may print
// a record twice: use it for looking, not for delivery.
type Stdout struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

var _ Sink = (*Stdout)(nil)

// Capabilities: stdout offers nothing beyond Write.
func (s *Stdout) Capabilities() Capabilities { return Capabilities{} }

// NewStdout returns a sink writing to w (os.Stdout when nil).
func NewStdout(w io.Writer) *Stdout {
	if w == nil {
		w = os.Stdout
	}
	return &Stdout{w: w}
}

// Write prints batch, one JSON object per line.
func (s *Stdout) Write(ctx context.Context, batch []Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.buf[:0]
	for i := range batch {
		s.buf = AppendJSONL(s.buf, &batch[i])
	}
	_, err := s.w.Write(s.buf)
	return err
}

// Finish does nothing: every Write is already printed.
func (s *Stdout) Finish(context.Context) error { return nil }

// Close does nothing.
func (s *Stdout) Close() error { return nil }
