package postgres

import (
	"context"
	"strings"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Open builds the postgres sink sp describes (a validated plan section of
// type postgres), connecting to its database. On error the Sink is nil.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	s, err := New(ctx, Config{DSN: c.DSN, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns,
		CopyThreshold: c.CopyThreshold, OnTombstone: c.OnTombstone, Version: c.Version, Connections: c.Connections,
		ApplicationName: applicationName(sp.Options.PlanName), Checkpoints: sqlcheckpoint.ConfigOf(c.CheckpointTable, sp.Options), Log: sp.Options.Log, Mapped: sp.Options.Mapped,
		DecodedValue: sp.Options.DecodedValue, DecodedKey: sp.Options.DecodedKey})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// applicationName is the application_name of a plan's connections:
// "replay:<plan name>", cut to the 63 bytes PostgreSQL keeps.
func applicationName(plan string) string {
	name := "replay"
	if plan != "" {
		name += ":" + plan
	}
	if len(name) > 63 {
		name = strings.ToValidUTF8(name[:63], "")
	}
	return name
}
