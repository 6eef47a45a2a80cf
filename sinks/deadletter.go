package sinks

import (
	"context"

	"github.com/replay-tool/replay/internal/record"
)

// DeadLetter returns r marked as a dead letter: a record that could not be
// processed, and why. Written to a dead-letter sink it keeps its key,
// value, headers and coordinates (so a re-delivered dead letter overwrites
// itself, as any record does) and carries the reason: AppendJSONL adds the
// fields error, source_topic, source_partition and source_offset; other
// sinks get them as headers (WithDeadLetterHeaders).
func DeadLetter(r record.Record, reason string) record.Record { return record.DeadLetter(r, reason) }

// HeaderError carries a dead letter's reason in a sink without JSON lines
// (kafka, postgres, sqlite, http), after the record's own headers; the
// source coordinates are the record's own (the kafka sink adds them as
// provenance headers, the database sinks store them in columns).
const HeaderError = "replay-error"

// WithDeadLetterHeaders wraps s, a sink that knows nothing of dead
// letters, so that each record it writes carries its dead-letter reason as
// the header HeaderError after its own headers (a column maps it as
// header.replay-error). The wrapper declares s's capabilities less its
// checkpoint table.
func WithDeadLetterHeaders(s Sink) Sink { return &headerDeadLetters{Sink: s} }

// headerDeadLetters writes dead letters to a sink that knows nothing of
// them, with the reason and coordinates as headers.
type headerDeadLetters struct{ Sink }

func (s *headerDeadLetters) Write(ctx context.Context, batch []record.Record) error {
	out := make([]record.Record, 0, len(batch))
	for _, r := range batch {
		hs := make([]record.Header, len(r.Headers), len(r.Headers)+1)
		copy(hs, r.Headers)
		r.Headers = append(hs, record.Header{Key: HeaderError, Value: []byte(r.DeadLetterReason())})
		out = append(out, r)
	}
	return s.Sink.Write(ctx, out)
}

// Capabilities are the wrapped sink's, but for its checkpoint table: the
// runner keeps checkpoints in the main sink only. A CSV dead-letter file
// still batches durability (Sync) and checks its staging on a resume, an
// http one still retries by itself.
func (s *headerDeadLetters) Capabilities() Capabilities {
	c := s.Sink.Capabilities()
	c.Checkpoints = nil
	return c
}
