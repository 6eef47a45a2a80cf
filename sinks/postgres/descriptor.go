package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Type is the postgres sink's type in a plan.
const Type plan.SinkType = "postgres"

// DefaultCopyThreshold is copy_threshold when the plan leaves it out: a
// batch of up to 100 rows goes as one statement over arrays, one round
// trip; a larger one streams through COPY (three more round trips), which
// the server reads as fast and which never holds the whole batch encoded
// in memory: the arrays of a 1000-row batch are a message of about 0.5
// MiB, built twice.
const DefaultCopyThreshold = 100

// Section is a postgres sink's own fields in a plan (Descriptor.Fields
// says what each means), in Sink.Config.
type Section struct {
	DSN              string `yaml:"dsn"`
	dbsection.Common `yaml:",inline"`
	CopyThreshold    int `yaml:"copy_threshold"`
	Connections      int `yaml:"connections"`
}

// section returns the postgres sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the postgres sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "PostgreSQL table, batched upserts on the idempotency key",
	NewConfig: func() any { return new(Section) },
	Fields: append(dbsection.Fields([]plan.FieldDescriptor{
		{Name: "dsn", Credentials: true, Required: "missing: add dsn: ${ORDERS_DSN} and export ORDERS_DSN=postgres://user:password@host:5432/db",
			Doc: "PostgreSQL connection string; its password must come from the environment, e.g. dsn: ${ORDERS_DSN}."},
	}, plan.FieldDescriptor{Name: "copy_threshold", Default: strconv.Itoa(DefaultCopyThreshold),
		Doc:    "postgres: batches of more rows than this are loaded with COPY into a temporary table, then upserted from it in the same transaction (default 100). While the table holds none of the keys written (a fresh load), a batch is written without ON CONFLICT: copied into the table itself, whatever its size, or, where a column's values need a cast, inserted from the arrays or the temporary table.",
		Schema: plan.OrEnv(map[string]any{"type": "integer", "minimum": 1, "maximum": 1000000})}),
		sinks.ConnectionsField),
	Check:            check,
	Shared:           true,
	Service:          "database",
	UsesKey:          true,
	Checkpoints:      func(s *plan.Sink) string { return section(s).Checkpoints() },
	CheckpointsField: dbsection.CheckpointTable.Name,
	Where:            func(s *plan.Sink) string { return "postgres table " + section(s).Table },
	Secrets: func(s *plan.Sink, _ func(string) (string, bool)) []string {
		return plan.DSNSecrets(section(s).DSN)
	},
}

// check checks a postgres section: its DSN, what it shares with sqlite,
// its connections and copy_threshold.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	if s.DSN != "" && c.LiteralDSNPassword("dsn") {
		c.Add("dsn", "contains a literal password: take the DSN (or its password) from the environment, e.g. dsn: ${ORDERS_DSN}, and export the variable")
	}
	sinks.CheckConnections(c, s.Connections)
	dbsection.Check(c, &s.Common)
	if s.CopyThreshold < 1 || s.CopyThreshold > 1000000 {
		c.Add("copy_threshold", "%d: want 1..1000000 rows (batches with more rows go through COPY)", s.CopyThreshold)
	}
}

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
