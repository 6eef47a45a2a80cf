// Package registry is the closed set of sink types: one table entry per
// driver, pairing the description of its plan section with its
// constructor. It builds the plan.SinkCatalog plans are loaded against and
// the sink a plan section describes.
package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/replay-tool/replay/sinks/stdout"
)

// drivers are the sink types, in the order messages and the JSON Schema
// list them: each driver's description and constructor (its Open, which
// returns a nil Sink interface with its error, never a typed nil pointer).
var drivers = []struct {
	desc plan.SinkDescriptor
	open func(ctx context.Context, sp sinks.Spec) (sinks.Sink, error)
}{
	{file.Descriptor, file.Open},
	{postgres.Descriptor, postgres.Open},
	{sqlite.Descriptor, sqlite.Open},
	{kafka.Descriptor, kafka.Open},
	{httpsink.Descriptor, httpsink.Open},
	{stdout.Descriptor, stdout.Open},
	{parquet.Descriptor, parquet.Open},
}

// Catalog returns the sink types this version implements, each with the
// descriptors of its fields, for plan.LoadOptions.Sinks. The result is the
// caller's.
func Catalog() plan.SinkCatalog {
	out := make(plan.SinkCatalog, len(drivers))
	for i, d := range drivers {
		out[i] = d.desc
		out[i].Fields = slices.Clone(d.desc.Fields)
	}
	return out
}

// Describe returns the descriptor of the type of sink section s; the zero
// descriptor (no property set) for a type this version does not implement.
func Describe(s plan.Sink) plan.SinkDescriptor {
	d, _ := Catalog().Lookup(s.Type)
	return d
}

// New builds the sink that cfg describes. cfg has been validated by
// package plan. An error says which part of the section failed (an unknown
// type, the driver's own checks or connection).
func New(ctx context.Context, cfg plan.Sink, opts sinks.Options) (sinks.Sink, error) {
	for _, d := range drivers {
		if d.desc.Type == cfg.Type {
			return d.open(ctx, sinks.Spec{Plan: cfg, Options: opts})
		}
	}
	return nil, fmt.Errorf("unknown sink type %q", cfg.Type)
}

// NewDeadLetter builds the dead-letter sink cfg describes (validated by
// package plan), with sinks.Options.DeadLetter set (a file keeps partition
// order, whatever its section says). A JSONL file or stdout sink writes each dead letter as its
// JSON line with the reason and source coordinates as extra fields; any
// other sink (a CSV file included) gets the record with the reason appended
// as the header sinks.HeaderError (sinks.WithDeadLetterHeaders). A kafka
// dead-letter sink produces each record under its own key (a null key stays
// null), not the idempotency key, unless the section sets key:.
func NewDeadLetter(ctx context.Context, cfg plan.Sink, opts sinks.Options) (sinks.Sink, error) {
	opts.DeadLetter = true
	d := Describe(cfg)
	s, err := New(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("dead-letter sink: %w", err)
	}
	if d.DeadLetterInLine != nil && d.DeadLetterInLine(&cfg) {
		return s, nil
	}
	return sinks.WithDeadLetterHeaders(s), nil
}
