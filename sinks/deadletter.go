package sinks

import (
	"context"
	"fmt"
	"strconv"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// DeadLetter returns r marked as a dead letter: a record that could not be
// processed, and why. Written to a dead-letter sink it keeps its key,
// value, headers and coordinates (so a re-delivered dead letter overwrites
// itself, as any record does) and carries the reason: AppendJSONL adds the
// fields error, source_topic, source_partition and source_offset; other
// sinks get them as headers (see NewDeadLetterSink).
func DeadLetter(r Record, reason string) Record { return record.DeadLetter(r, reason) }

// HeaderError carries a dead letter's reason in a sink without JSON lines
// (kafka, postgres, sqlite, http), after the record's own headers; the
// source coordinates are the record's own (the kafka sink adds them as
// provenance headers, the database sinks store them in columns).
const HeaderError = "replay-error"

// NewDeadLetterSink builds the dead-letter sink cfg describes (validated by
// package plan). A JSONL file sink writes each dead letter as its JSON line
// with the reason and source coordinates as extra fields; any other sink
// (a CSV file included) gets the record with the reason appended as the
// header HeaderError, which a column maps as header.replay-error. A kafka
// dead-letter sink produces each record under its own key (a null key stays
// null), not the idempotency key, unless the section sets key:.
func NewDeadLetterSink(ctx context.Context, cfg plan.Sink, opts Options) (Sink, error) {
	// In partition order, a re-delivered partition is rewritten rather than
	// skipped: a resumed run may dead-letter other records than the first
	// (a sink that rejected a record may take it now).
	cfg.Order = plan.OrderPartition
	// A kafka dead-letter topic keeps each record's own key (unless the
	// section sets key:), so that its records can be replayed as they were.
	s, err := newSink(ctx, cfg, opts, cfg.Type == "kafka" && cfg.Key == "")
	if err != nil {
		return nil, fmt.Errorf("dead-letter sink: %w", err)
	}
	if (cfg.Type == "file" && cfg.Format != "csv") || cfg.Type == "stdout" {
		return s, nil // AppendJSONL writes the reason
	}
	return &headerDeadLetters{Sink: s}, nil
}

// headerDeadLetters writes dead letters to a sink that knows nothing of
// them, with the reason and coordinates as headers.
type headerDeadLetters struct{ Sink }

func (s *headerDeadLetters) Write(ctx context.Context, batch []Record) error {
	out := make([]Record, 0, len(batch))
	for _, r := range batch {
		hs := make([]Header, len(r.Headers), len(r.Headers)+1)
		copy(hs, r.Headers)
		r.Headers = append(hs, Header{Key: HeaderError, Value: []byte(r.DeadLetterReason())})
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

// appendDeadLetterFields appends the fields of a dead letter's JSON line
// after the record's own: ,"error":...,"source_topic":...,
// "source_partition":...,"source_offset":...
func appendDeadLetterFields(b []byte, r *Record) []byte {
	b = append(b, `,"error":`...)
	b = appendJSONString(b, r.Note.Reason)
	b = append(b, `,"source_topic":`...)
	b = appendJSONString(b, r.Topic)
	b = append(b, `,"source_partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"source_offset":`...)
	return strconv.AppendInt(b, r.Offset, 10)
}
