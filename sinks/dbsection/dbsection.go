// Package dbsection is the part of a plan's sink section that the database
// sinks (postgres, sqlite) share: the descriptors of its fields and its
// rules (the column mapping, the checkpoint table, tombstones, the version
// that guards upserts).
package dbsection

import (
	"fmt"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// The values of a database sink's on_tombstone.
const (
	OnTombstoneWrite  = "write"
	OnTombstoneDelete = "delete"
	OnTombstoneSkip   = "skip"
)

// OnTombstones are the values of a database sink's on_tombstone; "" is
// write.
var OnTombstones = []string{OnTombstoneWrite, OnTombstoneDelete, OnTombstoneSkip}

// Common are the fields both database sinks take, part of each one's
// config struct (inline).
type Common struct {
	Table           string       `yaml:"table"`
	OnConflict      string       `yaml:"on_conflict"`
	CreateTable     bool         `yaml:"create_table"`
	Columns         plan.Columns `yaml:"columns"`
	CheckpointTable string       `yaml:"checkpoint_table"`
	OnTombstone     string       `yaml:"on_tombstone"`
	Version         string       `yaml:"version"`
	Overwrite       bool         `yaml:"overwrite"`
}

// Fields describe the fields both database sinks take, in the order they
// list them.
var (
	Table = plan.FieldDescriptor{Name: "table", Fingerprint: true, Required: "missing: the table to upsert into",
		Doc: "Target table of a postgres or sqlite sink, [schema.]name."}
	// A replay exists to overwrite what the buggy run wrote: update.
	OnConflict = plan.FieldDescriptor{Name: "on_conflict", Fingerprint: true, Default: "update", Enum: []string{"update", "ignore"},
		Doc: "postgres and sqlite: update (default: the replayed record wins) or ignore (the stored row wins)."}
	CreateTable = plan.FieldDescriptor{Name: "create_table",
		Doc: "postgres and sqlite: create the table when it is missing: the default layout (key, topic, partition, offset, timestamp, value, value_bytes, kafka_key, headers: the exact bytes of key, value and headers), or the columns, typed after their fields (text; jsonb for value and headers; timestamptz; int and bigint for partition and offset) with the key column as primary key."}
	CheckpointTable = plan.FieldDescriptor{Name: "checkpoint_table",
		Doc:    "postgres and sqlite: table (created when missing) where every write also records, in the same transaction, the partition's next offset for the group with the plan fingerprint; a resume starts from the later of it and the Kafka commit, so a failed commit re-writes nothing. Not used with on_error: dead_letter.",
		Schema: map[string]any{"type": "string", "pattern": `^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$|` + plan.EnvPattern, "examples": []any{"replay_checkpoints"}}}
	OnTombstone = plan.FieldDescriptor{Name: "on_tombstone", Fingerprint: true, Enum: OnTombstones,
		Doc: "postgres and sqlite: what a tombstone (null value) does: write (default: a row with a NULL value), delete (removes the key's row, in order with the batch's upserts: compacted and CDC topics) or skip (counted, not written).",
		FingerprintValue: func(val any, _ *plan.Sink, _ bool) any {
			if val == OnTombstoneWrite {
				return ""
			}
			return val
		}}
	Version = plan.FieldDescriptor{Name: "version", Fingerprint: true,
		Doc: "postgres and sqlite: the record field that guards upserts, as in columns (offset, timestamp, value.updated_at, header.<name>), stored in its own column (replay_version in the default layout): a row changes only for a greater version; equal is an unchanged duplicate, smaller a stale update, both counted. Offsets compare only within one partition."}
	Overwrite = plan.FieldDescriptor{Name: "overwrite",
		Doc: "postgres and sqlite: acknowledge that on_conflict: update without version may overwrite rows newer than the replayed records (silences the warning). Default false."}
)

// Fields returns the fields both database sinks take, after the ones
// before (path or dsn) and with the ones between (copy_threshold) placed
// after checkpoint_table.
func Fields(before []plan.FieldDescriptor, between ...plan.FieldDescriptor) []plan.FieldDescriptor {
	out := append(before, Table, OnConflict, CreateTable, encode.ColumnsField, CheckpointTable)
	return append(append(out, between...), OnTombstone, Version, Overwrite)
}

// Checkpoints names where a database section records checkpoints with its
// rows ("checkpoint table <name>"); "" when it records none.
func (s *Common) Checkpoints() string {
	if s.CheckpointTable == "" {
		return ""
	}
	return "checkpoint table " + s.CheckpointTable
}

// Check checks what the postgres and sqlite sections share (s, part of
// the section c checks): the table, the column mapping, the checkpoint
// table, on_tombstone and version.
func Check(c *plan.SinkCheck, s *Common) {
	c.TableName("table", s.Table)
	c.Columns(s.Columns, true)
	ct := s.CheckpointTable
	switch {
	case !c.Present("checkpoint_table"):
	case ct == "":
		c.Add("checkpoint_table", "empty: name the table, e.g. replay_checkpoints, or remove the field")
	case !plan.IsTableName(ct):
		c.Add("checkpoint_table", "%q is not a plain table name ([schema.]name of ASCII letters, digits and _, not beginning with a digit)", ct)
	case strings.EqualFold(ct, s.Table):
		c.Add("checkpoint_table", "is the sink's own table: name another table, e.g. replay_checkpoints")
	case c.DeadLetter():
		c.Add("checkpoint_table", "applies to the sink only: dead letters do not say where the run is; remove it")
	case c.Plan.OnError == plan.OnErrorDeadLetter:
		c.Warn("checkpoint_table", "not used to resume with on_error: dead_letter: dead letters are written after the sink's transaction, so resuming from its checkpoint could lose them; a resume starts from the Kafka commit and re-writes the records after it (idempotently)")
	}
	if c.Present("on_tombstone") && s.OnTombstone == "" {
		c.Enum("on_tombstone", s.OnTombstone, OnTombstones)
	}
	version(c, s)
}

// versionFields are the fields that can order a key's updates, for
// messages.
const versionFields = "offset, timestamp, value.<path> or header.<name>"

// version checks a database sink's version field, and warns where an
// upsert may rewind rows: on_conflict: update without version (a replay of
// last week's records overwrites this week's rows) unless overwrite says
// so, and version: offset under a key that can move between partitions.
func version(c *plan.SinkCheck, s *Common) {
	if s.Version == "" {
		if c.Present("version") {
			c.Add("version", "empty: name the field that orders a key's updates, e.g. value.updated_at, or remove version")
			return
		}
		if !c.DeadLetter() && s.OnConflict != "ignore" && !s.Overwrite {
			c.Warn("on_conflict", "update without version: a replayed record overwrites its row even when the row is newer (the live pipeline may have updated it since); add version: <field> (e.g. value.updated_at) to change rows only for a greater version, or overwrite: true to accept it")
		}
		return
	}
	fl, err := plan.ParseField(s.Version)
	if err != nil {
		// The hint names only fields that can order updates.
		msg := fmt.Sprintf("unknown field %q: want %s", s.Version, versionFields)
		if hint := plan.Suggest(s.Version, []string{"offset", "timestamp"}); hint != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		} else if hint := plan.SuggestField(s.Version); strings.HasPrefix(hint, "value.") || strings.HasPrefix(hint, "header.") {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		c.Add("version", "%s", msg)
		return
	}
	switch fl.Kind {
	case plan.FieldOffset, plan.FieldTimestamp, plan.FieldValuePath, plan.FieldHeader:
	default:
		c.Add("version", "%q cannot order updates: want %s", s.Version, versionFields)
		return
	}
	c.ReadsValue("version", s.Version)
	if fl.Kind == plan.FieldTimestamp {
		c.Warn("version", "timestamps order updates only to the millisecond, and on a topic with message.timestamp.type=LogAppendTime every record of a batch carries the batch's time: of two updates of a key with one timestamp the first wins (an equal version is a duplicate); prefer a field of the value that the producer increments, e.g. value.updated_at")
	}
	if key := c.Sink.Key; fl.Kind == plan.FieldOffset && key != "" {
		c.Warn("version", "offsets order updates only within one partition: with key %q a key may move between partitions, and a record of another partition with a smaller offset would be taken for stale; prefer a field of the value, e.g. value.updated_at", key)
	}
}

// Ignore reports whether onConflict (a sink's on_conflict) is ignore; an
// error for a value other than "", update and ignore.
func Ignore(onConflict string) (bool, error) {
	switch onConflict {
	case "", "update":
		return false, nil
	case "ignore":
		return true, nil
	}
	return false, fmt.Errorf("on_conflict %q: want update or ignore", onConflict)
}

// ParseVersion parses a sink's version, which must name a field that can
// order updates (versionFields).
func ParseVersion(version string) (plan.Field, error) {
	f, err := plan.ParseField(version)
	if err != nil {
		return f, fmt.Errorf("version: %w", err)
	}
	switch f.Kind {
	case plan.FieldOffset, plan.FieldTimestamp, plan.FieldValuePath, plan.FieldHeader:
		return f, nil
	}
	return f, fmt.Errorf("version %q cannot order updates: want offset, timestamp, value.<path> or header.<name>", version)
}
