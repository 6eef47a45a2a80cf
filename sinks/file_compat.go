package sinks

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// The file sink's names for what moved to package encode and
// internal/record. The file sink keeps using them until it moves to a
// package of its own.

type (
	// Record is record.Record.
	Record = record.Record
	// Header is record.Header.
	Header = record.Header
	// RecordError is record.Error.
	RecordError = record.Error
)

func recordError(r *record.Record, err error) *record.Error { return record.NewError(r, err) }

// AppendJSONL is encode.AppendJSONL.
func AppendJSONL(b []byte, r *record.Record) []byte { return encode.AppendJSONL(b, r) }

func appendJSONBytes(b, s []byte) []byte { return encode.AppendJSONBytes(b, s) }

func isOneLineJSON(v []byte) bool { return encode.IsOneLineJSON(v) }

// column is an encode.Column under the name the file sink reads.
type column struct {
	name string
	col  encode.Column
}

func parseColumns(cols plan.Columns, def []column, sqlNames bool) ([]column, error) {
	enc := make([]encode.Column, len(def))
	for i, c := range def {
		enc[i] = c.col
	}
	parsed, err := encode.ParseColumns(cols, enc, sqlNames)
	if err != nil {
		return nil, err
	}
	out := make([]column, len(parsed))
	for i, c := range parsed {
		out[i] = column{name: c.Name, col: c}
	}
	return out, nil
}

func usesKey(cols []column) bool {
	for _, c := range cols {
		if c.col.Field.Kind == plan.FieldKey {
			return true
		}
	}
	return false
}

// cells is encode.Cells with the field names the file sink sets.
type cells struct {
	r   *record.Record
	key string
	enc encode.Cells
}

func (cs *cells) text(c column) (string, bool) {
	cs.enc.Record, cs.enc.Key = cs.r, cs.key
	return cs.enc.Text(c.col)
}

// NewFileForPlan builds the file sink of a validated plan section, with
// keyer for its CSV key column.
func NewFileForPlan(cfg plan.Sink, opts Options, keyer *Keyer) (*File, error) {
	return NewFileSink(FileConfig{Path: cfg.Path, RunID: opts.RunID, Format: cfg.Format, Columns: cfg.Columns,
		PerPartition: cfg.PerPartition, Keyer: keyer, Interleave: cfg.Order == plan.OrderInterleaved})
}

// NewDeadLetterSink builds a file dead-letter sink, the one kind package
// sinks can build itself (package registry builds every kind: use
// registry.NewDeadLetter).
func NewDeadLetterSink(_ context.Context, cfg plan.Sink, opts Options) (Sink, error) {
	if cfg.Type != "file" {
		return nil, fmt.Errorf("dead-letter sink: package sinks builds file sinks only, not %q", cfg.Type)
	}
	cfg = DeadLetterConfig(cfg)
	keyer, err := NewKeyer(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("dead-letter sink: sink key: %w", err)
	}
	f, err := NewFileForPlan(cfg, opts, keyer)
	if err != nil {
		return nil, fmt.Errorf("dead-letter sink: %w", err)
	}
	if DeadLetterInLine(cfg) {
		return f, nil
	}
	return WithDeadLetterHeaders(f), nil
}
