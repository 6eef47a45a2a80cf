package sqlite

import (
	"context"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Open builds the sink a validated plan section describes. A database
// another process holds locked when it opens is waited for (SQLite's busy
// handler) up to the section's retry.max_elapsed, as a locked write is
// retried.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	s, err := New(ctx, Config{Path: c.Path, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns, OnTombstone: c.OnTombstone, Version: c.Version,
		Checkpoints: sqlcheckpoint.ConfigOf(c.CheckpointTable, sp.Options), Log: sp.Options.Log, Mapped: sp.Options.Mapped, OpenTimeout: time.Duration(sp.Plan.Retry.MaxElapsed),
		DecodedValue: sp.Options.DecodedValue, DecodedKey: sp.Options.DecodedKey})
	if err != nil {
		return nil, err
	}
	return s, nil
}
