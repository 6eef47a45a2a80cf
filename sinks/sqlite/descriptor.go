package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Type is the sqlite sink's type in a plan.
const Type plan.SinkType = "sqlite"

// Section is a sqlite sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	Path             string `yaml:"path"`
	dbsection.Common `yaml:",inline"`
}

// section returns the sqlite sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the sqlite sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "table in a local SQLite database file, with the postgres sink's semantics",
	NewConfig: func() any { return new(Section) },
	Fields: dbsection.Fields([]plan.FieldDescriptor{
		{Name: "path", Fingerprint: true, Required: "missing: the database file, e.g. out/orders.db (created when missing)",
			Doc: "sqlite: the database file, created when missing, e.g. out/orders.db."},
	}),
	Check:            check,
	Service:          "database",
	UsesKey:          true,
	Checkpoints:      func(s *plan.Sink) string { return section(s).Checkpoints() },
	CheckpointsField: dbsection.CheckpointTable.Name,
	Where: func(ps *plan.Sink) string {
		s := section(ps)
		return "sqlite table " + s.Table + " in " + s.Path
	},
}

// check checks a sqlite section: what it shares with postgres, and a
// relative database path under a schedule.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	dbsection.Check(c, &s.Common)
	// Each interval of a schedule is a new run: a relative database path
	// resolves against the working directory of each invocation (cron's is
	// the home directory), and an invocation from elsewhere would start a
	// new database holding only its intervals.
	if c.Schedule() && s.Path != "" && !filepath.IsAbs(s.Path) && !strings.Contains(s.Path, "${") {
		c.Add("path", "%q is relative: with a schedule every invocation opens it from its own working directory, and one started elsewhere would write its intervals to another database; use an absolute path, e.g. /var/lib/replay/%s", s.Path, filepath.Base(s.Path))
	}
}

// Open builds the sink a validated plan section describes. A database
// another process holds locked when it opens is waited for (SQLite's busy
// handler, and retries where SQLite returns SQLITE_BUSY at once) up to the
// section's retry.max_elapsed, as a locked write is retried.
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
