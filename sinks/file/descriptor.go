package file

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the file sink's type in a plan.
const Type plan.SinkType = "file"

// Line orders of a file (Section.Order).
const (
	OrderInterleaved = "interleaved"
	OrderPartition   = "partition"
)

// DefaultFormat is a file's format when the plan leaves it out: whole
// records, readable back by `replay test`.
const DefaultFormat = "jsonl"

// PartitionPlaceholder stands for the partition number in the path of a
// file with per_partition.
const PartitionPlaceholder = "{partition}"

// ShardPlaceholder stands for the shard's index in the path of a file
// written by one shard of a sharded run (replay run --shard I/N): each
// shard writes its own file.
const ShardPlaceholder = "{shard}"

// Section is a file sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	Path         string       `yaml:"path"`
	Columns      plan.Columns `yaml:"columns"`
	Format       string       `yaml:"format"`
	PerPartition bool         `yaml:"per_partition"`
	Order        string       `yaml:"order"`
	ValueFormat  string       `yaml:"value_format"`
	Overwrite    bool         `yaml:"overwrite"`
}

// section returns the file sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the file sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "newline-delimited JSON or CSV file, published atomically (temp file + rename)",
	NewConfig: func() any { return new(Section) },
	Fields: []plan.FieldDescriptor{
		{Name: "path", Fingerprint: true, Required: "missing: the file to write, e.g. out/orders.jsonl",
			Doc: "Output file of a file sink (written atomically; with per_partition a pattern holding {partition}, e.g. out/orders-{partition}.csv; for a sharded run, {shard} is the shard's index, e.g. out/orders-{shard}.jsonl)."},
		encode.ColumnsField,
		{Name: "format", Fingerprint: true, Default: DefaultFormat, Enum: []string{"jsonl", "csv"},
			Doc:              "file: jsonl (default: one JSON object per record) or csv (a header row, then one row per record with the columns; RFC 4180 quoting, LF line ends, NULL as an empty field).",
			FingerprintValue: encode.DefaultAsUnset(DefaultFormat)},
		{Name: "per_partition", Fingerprint: true,
			Doc: "file: write one file per partition (path holds {partition}), each published atomically when the run completes."},
		{Name: "order", Fingerprint: true, Enum: []string{OrderInterleaved, OrderPartition},
			Doc: "file: line order of a single JSONL file: interleaved (default; partitions interleave, each in offset order; the output is written to disk once) or partition (grouped by partition: byte-identical for the same window, but written twice). CSV, per_partition and dead-letter files are always in partition order.",
			FingerprintValue: func(val any, s *plan.Sink, deadLetter bool) any {
				if val == defaultOrder(section(s), deadLetter) {
					return ""
				}
				return val
			}},
		encode.ValueFormatField,
		{Name: "overwrite", Doc: "file: replace a file at path that replay did not write (refused otherwise)."},
	},
	Defaults: func(s *plan.Sink, deadLetter bool) {
		if c := section(s); c.Order == "" {
			c.Order = defaultOrder(c, deadLetter)
		}
	},
	Check: check,
	// A csv file needs its columns.
	Schema: []map[string]any{{"if": map[string]any{"properties": map[string]any{"format": map[string]any{"const": "csv"}}, "required": []any{"format"}},
		"then": map[string]any{"required": []any{"columns"}}}},
	StagingDir: stagingDir,
	Where:      func(s *plan.Sink) string { return section(s).Path },
	JSONLines: func(ps *plan.Sink) string {
		if s := section(ps); s.Format != "csv" && !s.PerPartition {
			return s.Path
		}
		return ""
	},
	DeadLetterInLine: func(s *plan.Sink) bool { return section(s).Format != "csv" },
	Shard:            shard,
	OwnOutput:        func(s *plan.Sink) string { return filepath.Clean(section(s).Path) },
}

// shard gives a shard its own file: {shard} in the path becomes its index.
// A path without it cannot be shared by several shards, and one with it
// needs a sharded run.
func shard(ps *plan.Sink, index, count int) (any, error) {
	s := section(ps)
	has := strings.Contains(s.Path, ShardPlaceholder)
	switch {
	case count == 0 && has:
		return nil, fmt.Errorf("file sink: path %q holds %s, which only a sharded run replaces: write a sharded resolution with 'replay plan PLAN --shards N --out FILE' and run each shard with 'replay run PLAN --resolution FILE --shard I/N', or remove %s", s.Path, ShardPlaceholder, ShardPlaceholder)
	case count > 1 && !has:
		ext := filepath.Ext(s.Path)
		return nil, fmt.Errorf("file sink: path %q: the shards of a sharded run would all write it; put %s in the path so that each writes its own file, e.g. %s", s.Path, ShardPlaceholder, strings.TrimSuffix(s.Path, ext)+"-"+ShardPlaceholder+ext)
	}
	c := *s
	c.Path = strings.ReplaceAll(s.Path, ShardPlaceholder, strconv.Itoa(index))
	return &c, nil
}

// stagingDir is where a single file's output waits until it is published
// ("" for per_partition files, staged next to each).
func stagingDir(ps *plan.Sink) string {
	s := section(ps)
	if s.PerPartition {
		return ""
	}
	return s.Path + ".parts"
}

// defaultOrder is the line order of a file without order: interleaved for
// a single JSONL file, partition for the others. A dead-letter file is
// always in partition order: its re-delivered partitions are rewritten,
// not skipped.
func defaultOrder(s *Section, deadLetter bool) string {
	if s.Format == "csv" || s.PerPartition || deadLetter {
		return OrderPartition
	}
	return OrderInterleaved
}

// check checks a file section: its path, format, columns, order and
// per_partition.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	encode.CheckDecodedValueFormat(c, s.ValueFormat)
	if vf := s.ValueFormat; s.Format == "csv" && vf != "" && vf != "auto" && slices.Contains(encode.ValueFormats, vf) {
		c.Add("value_format", "applies to format: jsonl only (csv cells are text): remove value_format, or use format: jsonl")
	}
	switch {
	case s.Path == "":
	case strings.HasSuffix(s.Path, "/") || strings.HasSuffix(s.Path, string(filepath.Separator)):
		c.Add("path", "%q ends in %q: it names a directory; give the file to write, e.g. %s", s.Path, s.Path[len(s.Path)-1:], filepath.Join(s.Path, "orders.jsonl"))
	}
	switch {
	case s.Format == "csv" && len(s.Columns) == 0 && !c.Failed("columns"):
		c.Add("columns", "missing: a csv file needs its columns, e.g. {order_id: value.id, status: value.status, offset: offset}")
	case s.Format == "jsonl" && c.Present("columns"):
		c.Add("columns", "applies to format: csv only (jsonl writes whole records): set format: csv, or remove columns")
	}
	c.Columns(s.Columns, false)
	if c.Present("order") && s.Order == OrderInterleaved {
		switch {
		case c.DeadLetter():
			c.Add("order", "dead letters are always kept in partition order: remove order")
		case s.PerPartition:
			c.Add("order", "each per_partition file holds one partition: remove order")
		case s.Format == "csv":
			c.Add("order", "a csv file is always in partition order (its rows are converted when it is published): remove order")
		}
	}
	pattern := strings.Contains(s.Path, PartitionPlaceholder)
	switch {
	case s.Path == "":
	case s.PerPartition && !pattern:
		ext := filepath.Ext(s.Path)
		c.Add("path", "per_partition needs %s in the path, e.g. %s", PartitionPlaceholder, strings.TrimSuffix(s.Path, ext)+"-"+PartitionPlaceholder+ext)
	case !s.PerPartition && pattern:
		c.Add("path", "%s is replaced only with per_partition: true: set it, or remove %s", PartitionPlaceholder, PartitionPlaceholder)
	}
	if c.Schedule() {
		c.Add("type", "a file sink publishes its path once per interval, so with a schedule the file would hold the last interval only: use a postgres, sqlite, kafka or http sink")
	}
	if c.DeadLetter() && c.Plan.Sink.Type == Type && s.Path != "" && filepath.Clean(s.Path) == filepath.Clean(section(&c.Plan.Sink).Path) {
		c.Add("path", "%s is the sink's own file: write dead letters to another file", s.Path)
	}
}

// Open builds the file sink sp describes (a validated plan section of type
// file), holding the lock of its output until Close. On error the Sink is
// nil.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	return sinks.Opened(New(Config{Path: c.Path, RunID: sp.Options.RunID, Format: c.Format, Columns: c.Columns, PerPartition: c.PerPartition,
		Interleave:  c.Order == OrderInterleaved && !sp.Options.DeadLetter,
		ValueFormat: encode.ValueFormat(c.ValueFormat), Overwrite: c.Overwrite, Partitions: sp.Options.Partitions, Log: sp.Options.Log}))
}
