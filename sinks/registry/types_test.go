package registry

import (
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/file"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/replay-tool/replay/sinks/stdout"
)

// Every driver has a descriptor with a type of its own: a type listed
// twice would make the second driver unreachable.
func TestDriverTypesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range drivers {
		if d.desc.Type == "" || d.open == nil {
			t.Errorf("driver %+v: no type or no constructor", d.desc.Type)
		}
		if seen[string(d.desc.Type)] {
			t.Errorf("sink type %q is listed twice", d.desc.Type)
		}
		seen[string(d.desc.Type)] = true
	}
}

// The catalog is the caller's: changing a descriptor it returned does not
// change the next one.
func TestCatalogIsACopy(t *testing.T) {
	c := Catalog()
	c[0].Type, c[0].Fields[0].Name = "changed", "changed"
	again := Catalog()
	if again[0].Type == "changed" || again[0].Fields[0].Name == "changed" {
		t.Error("a descriptor changed through a returned catalog")
	}
}

// The properties the command line decides on, for each type: what it
// decided before they were the drivers' (stdout takes the terminal, a
// database sink with checkpoint_table resumes from it, an exactly-once
// kafka sink fences a second run itself, ...).
func TestCommandLineProperties(t *testing.T) {
	type props struct {
		shared                        bool
		service                       string
		stdout, key, staged, inlineDL bool
		checkpoints, fences           bool
		where                         string
	}
	// Each type's section: a path, a table with its checkpoint table, an
	// exactly-once topic, as its type takes them.
	db := dbsection.Common{Table: "orders", CheckpointTable: "ck"}
	sections := map[plan.SinkType]any{
		"file":     &file.Section{Path: "out/o.db", Format: "jsonl"},
		"postgres": &postgres.Section{Common: db},
		"sqlite":   &sqlite.Section{Path: "out/o.db", Common: db},
		"kafka":    &kafka.Section{Topic: "copy", ExactlyOnce: true},
		"http":     &httpsink.Section{},
		"stdout":   &stdout.Section{},
		"parquet":  &parquet.Section{Path: "out/orders/"},
	}
	want := map[plan.SinkType]props{
		"file":     {staged: true, inlineDL: true, where: "out/o.db"},
		"postgres": {shared: true, service: "database", key: true, checkpoints: true, where: "postgres table orders"},
		"sqlite":   {service: "database", key: true, checkpoints: true, where: "sqlite table orders in out/o.db"},
		"kafka":    {shared: true, key: true, fences: true, where: "kafka topic copy"},
		"http":     {shared: true, service: "service", key: true, where: "http"},
		"stdout":   {stdout: true, inlineDL: true, where: "stdout"},
		"parquet":  {staged: true, where: "out/orders/"},
	}
	for _, d := range Catalog() {
		s := plan.Sink{Type: d.Type, Config: sections[d.Type]}
		got := props{shared: d.Shared, service: d.Service, stdout: d.WritesStdout, key: d.UsesKey, staged: d.StagingDir != nil,
			inlineDL:    d.DeadLetterInLine != nil && d.DeadLetterInLine(&s),
			checkpoints: d.Checkpoints != nil && d.Checkpoints(&s) != "", fences: d.FencesOthers != nil && d.FencesOthers(&s), where: string(d.Type)}
		if d.Where != nil {
			got.where = d.Where(&s)
		}
		if got != want[d.Type] {
			t.Errorf("%s: %+v, want %+v", d.Type, got, want[d.Type])
		}
	}
	s := plan.Sink{Type: "file", Config: &file.Section{Path: "out/o.csv", Format: "csv"}}
	if d := Describe(plan.Sink{Type: "file"}); d.DeadLetterInLine(&s) {
		t.Error("a csv dead-letter file writes its reasons in line")
	}
}
