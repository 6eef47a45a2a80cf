// Package postgres is the sink that upserts records into a PostgreSQL
// table, one row per idempotency key.
package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Config configures a PostgreSQL sink.
type Config struct {
	// DSN is a libpq connection string, URL or key=value. Its password never
	// appears in errors or logs.
	DSN string
	// Table is an SQL name, optionally schema-qualified: unquoted parts fold
	// to lower case as in SQL, "quoted" parts are taken as written.
	Table string
	// OnConflict is "update" (default: the replayed record wins) or "ignore"
	// (the row already stored wins).
	OnConflict string
	// CreateTable creates Table when it is missing: the default layout, or
	// Columns with types that follow their fields.
	CreateTable bool
	// Columns maps the table's columns to record fields; one must hold the
	// idempotency key. Empty means the default layout.
	Columns plan.Columns
	// CopyThreshold: a batch of more rows than this is loaded with COPY
	// into a temporary table, then upserted from it; smaller batches are
	// one statement over arrays. 0 means plan.DefaultCopyThreshold.
	CopyThreshold int
	// Checkpoints, when its Table is set, records the offset after each
	// batch in that table, in the batch's transaction (see sinks.CheckpointStore).
	Checkpoints sqlcheckpoint.Config
	// Keyer computes the key column; nil means DefaultKey.
	Keyer *sinks.Keyer
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Sink upserts records into one table, one row per idempotency key.
// Without a column mapping the table has the default layout:
//
//	key text primary key, topic text not null, partition int not null,
//	"offset" bigint not null, "timestamp" timestamptz not null,
//	value jsonb, headers jsonb not null
//
// value is the record value when it is valid JSON (invalid UTF-8 in it
// replaced by U+FFFD), else the value as a JSON string, NULL for a
// tombstone; headers is a JSON array of {"key","value"} in record order.
// With a mapping, each column holds the field it names (see cells.text),
// converted to the column's type, and the column holding the key is the
// conflict target.
//
// Write follows the Sink contract: it is synchronous (it returns once the
// rows are committed), safe for concurrent use, and keeps nothing of the
// batch. Re-delivered records overwrite their own rows (update) or leave them
// (ignore), so replaying a window again leaves the same table. Duplicate keys
// in one batch are resolved as separate batches would be: with update the
// last offset wins, with ignore the first, so the result does not depend on
// where the runner cut the batches — nor on whether the batch went through
// COPY.
type Sink struct {
	pool   *pgxpool.Pool
	name   string // Table as configured, for messages
	table  string // quoted
	keyer  *sinks.Keyer
	ignore bool
	cols   []encode.Column
	key    int // index of the key column
	// upsert is the statement over arrays; createTemp, copyCols and
	// fromTemp the COPY path's; copyAbove its threshold.
	upsert, createTemp, fromTemp string
	copyCols                     []string
	copyAbove                    int
	ckpt                         *sqlcheckpoint.Postgres
	log                          zerolog.Logger
	secrets                      []string
}

var (
	_ sinks.Sink            = (*Sink)(nil)
	_ sinks.CheckpointStore = (*Sink)(nil)
)

// Capabilities declares the checkpoint table (Checkpoints returns none
// when the plan configures none).
func (s *Sink) Capabilities() sinks.Capabilities { return sinks.Capabilities{Checkpoints: s} }

// New connects to cfg.DSN, creates the table when asked, and checks
// that the table can take the upsert (columns, types, a unique key).
// Connection errors are returned as they are: the caller retries or fails.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	table, err := encode.QuoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: table %q: %w", cfg.Table, err)
	}
	s := &Sink{name: cfg.Table, table: table, keyer: cfg.Keyer, log: cfg.Log, secrets: dsnSecrets(cfg.DSN), copyAbove: cfg.CopyThreshold}
	if s.copyAbove <= 0 {
		s.copyAbove = plan.DefaultCopyThreshold
	}
	switch cfg.OnConflict {
	case "", "update":
	case "ignore":
		s.ignore = true
	default:
		return nil, fmt.Errorf("postgres sink: on_conflict %q: want update or ignore", cfg.OnConflict)
	}
	if s.cols, err = encode.ParseColumns(cfg.Columns, encode.DefaultColumns(), true); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if s.key, err = encode.KeyColumn(s.cols); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if cfg.Checkpoints.Table != "" {
		if s.ckpt, err = sqlcheckpoint.NewPostgres(cfg.Checkpoints); err != nil {
			return nil, fmt.Errorf("postgres sink: %w", err)
		}
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: parse dsn: %w", s.scrub(err))
	}
	if p := pcfg.ConnConfig.Password; p != "" {
		s.secrets = append(s.secrets, p)
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if err := s.prepare(ctx, cfg.CreateTable); err != nil {
		s.pool.Close()
		return nil, err
	}
	c := pcfg.ConnConfig
	s.log.Debug().Str("host", c.Host).Uint16("port", c.Port).Str("database", c.Database).
		Str("user", c.User).Str("table", cfg.Table).Bool("ignore", s.ignore).Msg("postgres sink ready")
	return s, nil
}

// Finish does nothing: every Write is already committed.
func (s *Sink) Finish(context.Context) error { return nil }

// Close closes the connection pool.
func (s *Sink) Close() error {
	s.pool.Close()
	return nil
}

// Checkpoints returns the offsets the sink's checkpoint table holds for
// group and topic, written by this run (sqlcheckpoint.Config.RunID); none
// without a checkpoint table.
func (s *Sink) Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if s.ckpt == nil {
		return nil, nil
	}
	out, err := s.ckpt.Read(ctx, s.pool, group, topic)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read checkpoints from %s: %w", s.ckpt.Name, s.scrub(err))
	}
	return out, nil
}

// ResetCheckpoints deletes the checkpoints of group and topic.
func (s *Sink) ResetCheckpoints(ctx context.Context, group, topic string) error {
	if s.ckpt == nil {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.ckpt.Reset, group, topic); err != nil {
		return fmt.Errorf("postgres sink: reset checkpoints in %s: %w", s.ckpt.Name, s.scrub(err))
	}
	return nil
}
