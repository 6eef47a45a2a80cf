// Package sqlcheckpoint is the checkpoint table of the database sinks
// (postgres, sqlite): the offset after each batch, written in the batch's
// transaction (see sinks.CheckpointStore).
package sqlcheckpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// The checkpoint table has one row per group, topic and partition:
//
//	"group" text, "topic" text, "partition" int (the primary key),
//	"next_offset" bigint, "fingerprint" text, "run_id" text, "updated_at"
//
// next_offset is the offset after the last batch of the run written; it
// never moves back within a run (a re-delivered batch leaves it), and is
// replaced by the first batch of another run.

// Config configures the checkpoint table of a database sink.
type Config struct {
	// Table is the checkpoint table, created when missing; "" for none.
	Table string
	// Group is the replay consumer group the checkpoints belong to.
	Group string
	// Fingerprint (the plan's) and RunID (the resolved run's) are stored
	// with each checkpoint; only checkpoints of RunID are read back.
	Fingerprint, RunID string
}

// ConfigOf is the checkpoint table a plan section declares (its
// checkpoint_table, table; "" for none), recording checkpoints for the
// run's group, plan fingerprint and run identity (opts).
func ConfigOf(table string, opts sinks.Options) Config {
	return Config{Table: table, Group: opts.Group, Fingerprint: opts.Fingerprint, RunID: opts.RunID}
}

func checkpointBatch(batch []record.Record) (topic string, partition int32, next int64) {
	return batch[0].Topic, batch[0].Partition, batch[len(batch)-1].Offset + 1
}

// table is the SQL of a checkpoint table in one database's dialect.
type table struct {
	// Name is the table as configured, for messages.
	Name string
	// Reset deletes the checkpoints of a group (parameter 1) and topic
	// (2); ResetPartition only that of partition 3.
	Reset, ResetPartition string
	cfg                   Config
	create, upsert, sel   string
}

// newTable builds the statements of cfg's table for PostgreSQL (pg) or
// SQLite; an error when cfg has no group or the table name does not parse.
func newTable(cfg Config, pg bool) (table, error) {
	if cfg.Group == "" {
		return table{}, fmt.Errorf("checkpoint table %s: no consumer group to record checkpoints for", cfg.Table)
	}
	t, err := encode.QuoteTable(cfg.Table)
	if err != nil {
		return table{}, fmt.Errorf("checkpoint table %q: %w", cfg.Table, err)
	}
	arg := func(int) string { return "?" }
	text, integer, bigint, updated := "TEXT", "INTEGER", "INTEGER", "TEXT NOT NULL"
	into, old, greatest, now := t, "", "max", "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
	if pg {
		arg = func(i int) string { return "$" + strconv.Itoa(i) }
		text, integer, bigint, updated = "text", "int", "bigint", "timestamptz NOT NULL DEFAULT now()"
		into, old, greatest, now = t+" AS c", "c.", "GREATEST", "now()"
	}
	where := ` WHERE "group" = ` + arg(1) + ` AND "topic" = ` + arg(2)
	return table{Name: cfg.Table, cfg: cfg,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	"group" ` + text + ` NOT NULL,
	"topic" ` + text + ` NOT NULL,
	"partition" ` + integer + ` NOT NULL,
	"next_offset" ` + bigint + ` NOT NULL,
	"fingerprint" ` + text + ` NOT NULL,
	"run_id" ` + text + ` NOT NULL,
	"updated_at" ` + updated + `,
	PRIMARY KEY ("group", "topic", "partition")
)`,
		upsert: `INSERT INTO ` + into + ` ("group", "topic", "partition", "next_offset", "fingerprint", "run_id", "updated_at")
VALUES (` + arg(1) + `, ` + arg(2) + `, ` + arg(3) + `, ` + arg(4) + `, ` + arg(5) + `, ` + arg(6) + `, ` + now + `)
ON CONFLICT ("group", "topic", "partition") DO UPDATE SET
	"next_offset" = CASE WHEN ` + old + `"run_id" = excluded."run_id" THEN ` + greatest + `(` + old + `"next_offset", excluded."next_offset") ELSE excluded."next_offset" END,
	"fingerprint" = excluded."fingerprint", "run_id" = excluded."run_id", "updated_at" = excluded."updated_at"`,
		sel:            `SELECT "partition", "next_offset" FROM ` + t + where + ` AND "run_id" = ` + arg(3),
		Reset:          `DELETE FROM ` + t + where,
		ResetPartition: `DELETE FROM ` + t + where + ` AND "partition" = ` + arg(3),
	}, nil
}

// Postgres is the checkpoint table of a postgres sink.
type Postgres struct{ table }

// NewPostgres builds the statements of cfg's table; an error when cfg has
// no group or the table name does not parse.
func NewPostgres(cfg Config) (*Postgres, error) {
	t, err := newTable(cfg, true)
	if err != nil {
		return nil, err
	}
	return &Postgres{t}, nil
}

// Prepare creates the table when missing, running its CREATE TABLE IF NOT
// EXISTS statement through create (the sink serializes table creation),
// and checks the upsert against it.
func (c *Postgres) Prepare(ctx context.Context, pool *pgxpool.Pool, create func(ctx context.Context, stmt string) error) error {
	if err := create(ctx, c.create); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "EXPLAIN "+c.upsert, c.cfg.Group, "", int32(0), int64(0), c.cfg.Fingerprint, c.cfg.RunID)
	return err
}

// Queue adds batch's checkpoint to b, to run in the batch's transaction.
func (c *Postgres) Queue(b *pgx.Batch, batch []record.Record) {
	topic, part, next := checkpointBatch(batch)
	b.Queue(c.upsert, c.cfg.Group, topic, part, next, c.cfg.Fingerprint, c.cfg.RunID)
}

// Read returns the checkpoints of group and topic written by the run of
// the table's Config.RunID.
func (c *Postgres) Read(ctx context.Context, pool *pgxpool.Pool, group, topic string) (map[int32]int64, error) {
	rows, err := pool.Query(ctx, c.sel, group, topic, c.cfg.RunID)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var part int32
	var next int64
	_, err = pgx.ForEachRow(rows, []any{&part, &next}, func() error {
		out[part] = next
		return nil
	})
	return out, err
}

// SQLite is the checkpoint table of a sqlite sink.
type SQLite struct{ table }

// NewSQLite builds the statements of cfg's table; an error when cfg has no
// group or the table name does not parse.
func NewSQLite(cfg Config) (*SQLite, error) {
	t, err := newTable(cfg, false)
	if err != nil {
		return nil, err
	}
	return &SQLite{t}, nil
}

// Prepare creates the table when missing and checks the upsert against it.
func (c *SQLite) Prepare(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, c.create); err != nil {
		return err
	}
	stmt, err := db.PrepareContext(ctx, c.upsert)
	if err != nil {
		return err
	}
	return stmt.Close()
}

// Write records batch's checkpoint in tx.
func (c *SQLite) Write(ctx context.Context, tx *sql.Tx, batch []record.Record) error {
	topic, part, next := checkpointBatch(batch)
	_, err := tx.ExecContext(ctx, c.upsert, c.cfg.Group, topic, int64(part), next, c.cfg.Fingerprint, c.cfg.RunID)
	return err
}

// Read returns the checkpoints of group and topic written by the run of
// the table's Config.RunID.
func (c *SQLite) Read(ctx context.Context, db *sql.DB, group, topic string) (map[int32]int64, error) {
	rows, err := db.QueryContext(ctx, c.sel, group, topic, c.cfg.RunID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var part int32
		var next int64
		if err := rows.Scan(&part, &next); err != nil {
			return nil, err
		}
		out[part] = next
	}
	return out, errors.Join(rows.Err(), rows.Close())
}
