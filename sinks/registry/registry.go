// Package registry builds the sink a plan section describes: one table
// entry per sink type, mapping the type to its driver's constructor.
package registry

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/replay-tool/replay/sinks/stdout"
)

// constructor builds one type of sink from its validated plan section
// (a driver's Open). It returns a nil Sink interface with its error, never
// a typed nil pointer.
type constructor func(ctx context.Context, sp sinks.Spec) (sinks.Sink, error)

// constructors is the closed set of sink types, one driver each; every
// type plan.SinkTypes describes has an entry, and only those.
var constructors = map[plan.SinkType]constructor{
	plan.SinkFile:     file.Open,
	plan.SinkStdout:   stdout.Open,
	plan.SinkPostgres: postgres.Open,
	plan.SinkSQLite:   sqlite.Open,
	plan.SinkKafka:    kafka.Open,
	plan.SinkHTTP:     httpsink.Open,
}

// New builds the sink that cfg describes. cfg has been validated by
// package plan. An error says which part of the section failed (the key
// template, an unknown type, the driver's own checks or connection).
func New(ctx context.Context, cfg plan.Sink, opts sinks.Options) (sinks.Sink, error) {
	return build(ctx, cfg, opts, false)
}

// NewDeadLetter builds the dead-letter sink cfg describes (validated by
// package plan). A JSONL file or stdout sink writes each dead letter as its
// JSON line with the reason and source coordinates as extra fields; any
// other sink (a CSV file included) gets the record with the reason appended
// as the header sinks.HeaderError (sinks.WithDeadLetterHeaders). A kafka
// dead-letter sink produces each record under its own key (a null key stays
// null), not the idempotency key, unless the section sets key:.
func NewDeadLetter(ctx context.Context, cfg plan.Sink, opts sinks.Options) (sinks.Sink, error) {
	cfg = sinks.DeadLetterConfig(cfg)
	s, err := build(ctx, cfg, opts, sinks.DeadLetterKeepsKey(cfg))
	if err != nil {
		return nil, fmt.Errorf("dead-letter sink: %w", err)
	}
	if sinks.DeadLetterInLine(cfg) {
		return s, nil
	}
	return sinks.WithDeadLetterHeaders(s), nil
}

func build(ctx context.Context, cfg plan.Sink, opts sinks.Options, keepKey bool) (sinks.Sink, error) {
	keyer, err := sinks.NewKeyer(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("sink key: %w", err)
	}
	c, found := constructors[cfg.Type]
	if !found {
		return nil, fmt.Errorf("unknown sink type %q", cfg.Type)
	}
	return c(ctx, sinks.Spec{Plan: cfg, Options: opts, Keyer: keyer, KeepKey: keepKey})
}
