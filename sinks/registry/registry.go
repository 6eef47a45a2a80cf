// Package registry builds the sink a plan section describes: one table
// entry per sink type, mapping the type to its driver's constructor.
package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/replay-tool/replay/sinks/stdout"
)

// spec is what a constructor builds a sink from: the validated plan
// section, the run's options, the compiled key template, and whether a
// kafka sink keeps the source record keys (kafka.Config.KeepKey).
type spec struct {
	cfg     plan.Sink
	opts    sinks.Options
	keyer   *sinks.Keyer
	keepKey bool
}

// constructor builds one type of sink. It returns a nil Sink interface
// with its error, never a typed nil pointer.
type constructor func(ctx context.Context, sp spec) (sinks.Sink, error)

// constructors is the closed set of sink types.
var constructors = map[string]constructor{
	"file": func(_ context.Context, sp spec) (sinks.Sink, error) {
		return ok(file.New(fileConfig(sp)))
	},
	"stdout": func(context.Context, spec) (sinks.Sink, error) { return stdout.New(nil), nil },
	"postgres": func(ctx context.Context, sp spec) (sinks.Sink, error) {
		return ok(postgres.New(ctx, postgresConfig(sp)))
	},
	"sqlite": func(ctx context.Context, sp spec) (sinks.Sink, error) { return ok(sqlite.New(ctx, sqliteConfig(sp))) },
	"kafka":  func(ctx context.Context, sp spec) (sinks.Sink, error) { return ok(kafka.New(ctx, kafkaConfig(sp))) },
	"http":   func(_ context.Context, sp spec) (sinks.Sink, error) { return ok(httpsink.New(httpConfig(sp))) },
}

// ok returns s as a Sink, or a nil Sink with err: a nil *T returned as
// Sink would be a non-nil interface.
func ok[T sinks.Sink](s T, err error) (sinks.Sink, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
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
	c, found := constructors[string(cfg.Type)]
	if !found {
		return nil, fmt.Errorf("unknown sink type %q", cfg.Type)
	}
	return c(ctx, spec{cfg: cfg, opts: opts, keyer: keyer, keepKey: keepKey})
}

func checkpointConfig(sp spec) sqlcheckpoint.Config {
	return sqlcheckpoint.Config{Table: sp.cfg.CheckpointTable, Group: sp.opts.Group, Fingerprint: sp.opts.Fingerprint, RunID: sp.opts.RunID}
}

func fileConfig(sp spec) file.Config {
	c := sp.cfg
	return file.Config{Path: c.Path, RunID: sp.opts.RunID, Format: c.Format, Columns: c.Columns, PerPartition: c.PerPartition,
		Keyer: sp.keyer, Interleave: c.Order == plan.OrderInterleaved}
}

func postgresConfig(sp spec) postgres.Config {
	c := sp.cfg
	return postgres.Config{DSN: c.DSN, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns,
		CopyThreshold: c.CopyThreshold, Checkpoints: checkpointConfig(sp), Keyer: sp.keyer, Log: sp.opts.Log}
}

func sqliteConfig(sp spec) sqlite.Config {
	c := sp.cfg
	return sqlite.Config{Path: c.Path, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns,
		Checkpoints: checkpointConfig(sp), Keyer: sp.keyer, Log: sp.opts.Log}
}

func kafkaConfig(sp spec) kafka.Config {
	c := sp.cfg
	return kafka.Config{Brokers: c.Brokers, Topic: c.Topic, TLS: c.TLS, SASL: c.SASL, KeepPartition: c.KeepPartition,
		Keyer: sp.keyer, KeepKey: sp.keepKey, PlanName: sp.opts.PlanName, Log: sp.opts.Log}
}

func httpConfig(sp spec) httpsink.Config {
	c := sp.cfg
	retries := plan.DefaultMaxRetries
	if c.MaxRetries != nil {
		retries = *c.MaxRetries
	}
	return httpsink.Config{URL: c.URL, Headers: c.Headers, BatchSize: c.BatchSize, MaxRetries: retries,
		MaxRetryWait: time.Duration(c.MaxRetryWait), Keyer: sp.keyer, Log: sp.opts.Log}
}
