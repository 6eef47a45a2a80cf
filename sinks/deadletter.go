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
	h := &headerDeadLetters{Sink: s}
	// The wrapper has the optional interfaces of what it wraps, and only
	// those: a postgres dead-letter sink must not look like one that keeps
	// local staging (Resumer, refused by run --join), and an http one must
	// still say it retries by itself (SelfRetrying).
	_, staged := s.(Resumer)
	_, self := s.(SelfRetrying)
	switch {
	case staged:
		return &stagedDeadLetters{h}, nil
	case self:
		return &selfRetryingDeadLetters{h}, nil
	}
	return h, nil
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

// stagedDeadLetters is headerDeadLetters over a sink that stages its
// output locally (a CSV file, SQLite): it is a Syncer, Resumer and
// Positioner as the wrapped sink is.
type stagedDeadLetters struct{ *headerDeadLetters }

// Sync makes the dead letters durable when the wrapped sink batches
// durability (a CSV file): without it the runner would commit past dead
// letters still in the page cache.
func (s *stagedDeadLetters) Sync(ctx context.Context, partition int32) error {
	if sy, ok := s.Sink.(Syncer); ok {
		return sy.Sync(ctx, partition)
	}
	return nil
}

// CheckResume checks the wrapped sink's earlier output (Resumer).
func (s *stagedDeadLetters) CheckResume(points []ResumePoint) error {
	return s.Sink.(Resumer).CheckResume(points)
}

// SyncedPosition passes the wrapped sink's durable position through
// (Positioner), for a CSV dead-letter file.
func (s *stagedDeadLetters) SyncedPosition(partition int32) int64 {
	if p, ok := s.Sink.(Positioner); ok {
		return p.SyncedPosition(partition)
	}
	return 0
}

// selfRetryingDeadLetters is headerDeadLetters over a sink that retries by
// itself (http): the runner must not retry it again.
type selfRetryingDeadLetters struct{ *headerDeadLetters }

// RetriesItself implements SelfRetrying.
func (*selfRetryingDeadLetters) RetriesItself() {}

var (
	_ Syncer       = (*stagedDeadLetters)(nil)
	_ Resumer      = (*stagedDeadLetters)(nil)
	_ Positioner   = (*stagedDeadLetters)(nil)
	_ SelfRetrying = (*selfRetryingDeadLetters)(nil)
)

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
