package postgres

import (
	"context"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Open builds the postgres sink sp describes (a validated plan section of
// type postgres), connecting to its database. On error the Sink is nil.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := sp.Plan
	s, err := New(ctx, Config{DSN: c.DSN, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns,
		CopyThreshold: c.CopyThreshold, Checkpoints: sqlcheckpoint.ConfigOf(sp), Keyer: sp.Keyer, Log: sp.Options.Log})
	if err != nil {
		return nil, err
	}
	return s, nil
}
