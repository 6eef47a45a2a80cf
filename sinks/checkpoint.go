package sinks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The checkpoint table of the database sinks, one row per group, topic and
// partition:
//
//	"group" text, "topic" text, "partition" int (the primary key),
//	"next_offset" bigint, "fingerprint" text, "run_id" text, "updated_at"
//
// next_offset is the offset after the last batch of the run written; it
// never moves back within a run (a re-delivered batch leaves it), and is
// replaced by the first batch of another run.

func checkpointBatch(batch []Record) (topic string, partition int32, next int64) {
	return batch[0].Topic, batch[0].Partition, batch[len(batch)-1].Offset + 1
}

func checkCheckpointConfig(cfg CheckpointConfig) error {
	if cfg.Group == "" {
		return fmt.Errorf("checkpoint table %s: no consumer group to record checkpoints for", cfg.Table)
	}
	return nil
}

// pgCheckpoints is the checkpoint table of a postgres sink.
type pgCheckpoints struct {
	name                string // as configured, for messages
	cfg                 CheckpointConfig
	create, upsert, sel string
	reset               string
}

func newPGCheckpoints(cfg CheckpointConfig) (*pgCheckpoints, error) {
	if err := checkCheckpointConfig(cfg); err != nil {
		return nil, err
	}
	t, err := quoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("checkpoint table %q: %w", cfg.Table, err)
	}
	return &pgCheckpoints{name: cfg.Table, cfg: cfg,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	"group" text NOT NULL,
	"topic" text NOT NULL,
	"partition" int NOT NULL,
	"next_offset" bigint NOT NULL,
	"fingerprint" text NOT NULL,
	"run_id" text NOT NULL,
	"updated_at" timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY ("group", "topic", "partition")
)`,
		upsert: `INSERT INTO ` + t + ` AS c ("group", "topic", "partition", "next_offset", "fingerprint", "run_id", "updated_at")
VALUES ($1, $2, $3, $4, $5, $6, now())
ON CONFLICT ("group", "topic", "partition") DO UPDATE SET
	"next_offset" = CASE WHEN c."run_id" = excluded."run_id" THEN GREATEST(c."next_offset", excluded."next_offset") ELSE excluded."next_offset" END,
	"fingerprint" = excluded."fingerprint", "run_id" = excluded."run_id", "updated_at" = excluded."updated_at"`,
		sel:   `SELECT "partition", "next_offset" FROM ` + t + ` WHERE "group" = $1 AND "topic" = $2 AND "run_id" = $3`,
		reset: `DELETE FROM ` + t + ` WHERE "group" = $1 AND "topic" = $2`,
	}, nil
}

// prepare creates the table when missing and checks the upsert against it.
func (c *pgCheckpoints) prepare(ctx context.Context, pool *pgxpool.Pool) error {
	if err := createTable(ctx, pool, c.name, c.create); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "EXPLAIN "+c.upsert, c.cfg.Group, "", int32(0), int64(0), c.cfg.Fingerprint, c.cfg.RunID)
	return err
}

// queue adds batch's checkpoint to b.
func (c *pgCheckpoints) queue(b *pgx.Batch, batch []Record) {
	topic, part, next := checkpointBatch(batch)
	b.Queue(c.upsert, c.cfg.Group, topic, part, next, c.cfg.Fingerprint, c.cfg.RunID)
}

func (c *pgCheckpoints) read(ctx context.Context, pool *pgxpool.Pool, group, topic string) (map[int32]int64, error) {
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

// sqliteCheckpoints is the checkpoint table of a sqlite sink.
type sqliteCheckpoints struct {
	name                string
	cfg                 CheckpointConfig
	create, upsert, sel string
	reset               string
}

func newSQLiteCheckpoints(cfg CheckpointConfig) (*sqliteCheckpoints, error) {
	if err := checkCheckpointConfig(cfg); err != nil {
		return nil, err
	}
	t, err := quoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("checkpoint table %q: %w", cfg.Table, err)
	}
	return &sqliteCheckpoints{name: cfg.Table, cfg: cfg,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	"group" TEXT NOT NULL,
	"topic" TEXT NOT NULL,
	"partition" INTEGER NOT NULL,
	"next_offset" INTEGER NOT NULL,
	"fingerprint" TEXT NOT NULL,
	"run_id" TEXT NOT NULL,
	"updated_at" TEXT NOT NULL,
	PRIMARY KEY ("group", "topic", "partition")
)`,
		upsert: `INSERT INTO ` + t + ` ("group", "topic", "partition", "next_offset", "fingerprint", "run_id", "updated_at")
VALUES (?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT ("group", "topic", "partition") DO UPDATE SET
	"next_offset" = CASE WHEN "run_id" = excluded."run_id" THEN max("next_offset", excluded."next_offset") ELSE excluded."next_offset" END,
	"fingerprint" = excluded."fingerprint", "run_id" = excluded."run_id", "updated_at" = excluded."updated_at"`,
		sel:   `SELECT "partition", "next_offset" FROM ` + t + ` WHERE "group" = ? AND "topic" = ? AND "run_id" = ?`,
		reset: `DELETE FROM ` + t + ` WHERE "group" = ? AND "topic" = ?`,
	}, nil
}

func (c *sqliteCheckpoints) prepare(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, c.create); err != nil {
		return err
	}
	stmt, err := db.PrepareContext(ctx, c.upsert)
	if err != nil {
		return err
	}
	return stmt.Close()
}

// write records batch's checkpoint in tx.
func (c *sqliteCheckpoints) write(ctx context.Context, tx *sql.Tx, batch []Record) error {
	topic, part, next := checkpointBatch(batch)
	_, err := tx.ExecContext(ctx, c.upsert, c.cfg.Group, topic, int64(part), next, c.cfg.Fingerprint, c.cfg.RunID)
	return err
}

func (c *sqliteCheckpoints) read(ctx context.Context, db *sql.DB, group, topic string) (map[int32]int64, error) {
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
