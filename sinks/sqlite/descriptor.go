package sqlite

import (
	"path/filepath"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/dbsection"
)

// Type is the sqlite sink's type in a plan.
const Type plan.SinkType = "sqlite"

// Descriptor describes the sqlite sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:    Type,
	Summary: "table in a local SQLite database file, with the postgres sink's semantics",
	Fields: dbsection.Fields([]plan.FieldDescriptor{
		{Name: "path", Fingerprint: "Path", Required: "missing: the database file, e.g. out/orders.db (created when missing)",
			Doc: "sqlite: the database file, created when missing, e.g. out/orders.db."},
	}),
	Check:            check,
	Service:          "database",
	UsesKey:          true,
	KeepsCheckpoints: dbsection.KeepsCheckpoints,
	Where:            func(s *plan.Sink) string { return "sqlite table " + s.Table + " in " + s.Path },
}

// check checks a sqlite section: what it shares with postgres, and a
// relative database path under a schedule.
func check(c *plan.SinkCheck) {
	s := c.Sink
	dbsection.Check(c)
	// Each interval of a schedule is a new run: a relative database path
	// resolves against the working directory of each invocation (cron's is
	// the home directory), and an invocation from elsewhere would start a
	// new database holding only its intervals.
	if c.Schedule() && s.Path != "" && !filepath.IsAbs(s.Path) && !strings.Contains(s.Path, "${") {
		c.Add("path", "%q is relative: with a schedule every invocation opens it from its own working directory, and one started elsewhere would write its intervals to another database; use an absolute path, e.g. /var/lib/replay/%s", s.Path, filepath.Base(s.Path))
	}
}
