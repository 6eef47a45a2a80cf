package sqlite

import (
	"context"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Open builds the sqlite sink sp describes (a validated plan section of
// type sqlite), opening its database file. On error the Sink is nil.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := sp.Plan
	s, err := New(ctx, Config{Path: c.Path, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns, OnTombstone: c.OnTombstone, Version: c.Version,
		Checkpoints: sqlcheckpoint.ConfigOf(sp), Keyer: sp.Keyer, Log: sp.Options.Log})
	if err != nil {
		return nil, err
	}
	return s, nil
}
