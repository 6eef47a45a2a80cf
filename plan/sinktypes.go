package plan

import (
	"slices"
	"strings"
)

// SinkType names a kind of sink: the value of a sink's type field.
//
// It is an alias of string, so that code which stores or concatenates a
// sink type as a plain string keeps compiling; compare it with the
// constants below rather than with string literals.
type SinkType string

// The sink types this version implements.
const (
	SinkFile     SinkType = "file"
	SinkStdout   SinkType = "stdout"
	SinkPostgres SinkType = "postgres"
	SinkSQLite   SinkType = "sqlite"
	SinkKafka    SinkType = "kafka"
	SinkHTTP     SinkType = "http"
)

// SinkDescriptor describes one sink type: what it writes to, which
// type-specific fields it takes and which of them a plan must set.
type SinkDescriptor struct {
	Type SinkType
	// Summary says in one line what the sink writes to.
	Summary string
	// Required are the type-specific fields a plan must set for this type.
	// Rules that depend on other fields (a csv file needs columns) are not
	// listed here.
	Required []string
	// Fields are all the type-specific fields the type takes, Required
	// included, in the order of SinkFields. Every type also takes the
	// fields of SinkFields whose Types is empty (type, key, batch_size).
	Fields []string
	// Shared reports whether the output can be written by several processes
	// at once: such a sink can be used by `run --join` members, as the sink
	// or as the dead-letter sink. A local file or database cannot.
	Shared bool
	// Service is what the sink writes to when that is a service with live
	// traffic of its own ("database", "service"), which a replay without a
	// throttle can starve; "" for the others.
	Service string

	// missing is the hint for each Required field that is not set.
	missing map[string]string
}

// FieldDescriptor describes one field of a sink.
type FieldDescriptor struct {
	// Name is the field's name in the plan (its yaml key).
	Name string
	// Doc says what the field is, its default and an example.
	Doc string
	// Types are the sink types that take the field, in the order messages
	// name them; empty for a field every sink takes.
	Types []SinkType
}

// sinkDescriptors lists the sink types in the order messages and the JSON
// Schema list them. Their Fields are filled in by clone, from sinkFieldTable.
var sinkDescriptors = []SinkDescriptor{
	{Type: SinkFile, Summary: "newline-delimited JSON or CSV file, published atomically (temp file + rename)",
		Required: []string{"path"},
		missing:  map[string]string{"path": "missing: the file to write, e.g. out/orders.jsonl"}},
	{Type: SinkPostgres, Summary: "PostgreSQL table, batched upserts on the idempotency key",
		Required: []string{"dsn", "table"}, Shared: true, Service: "database",
		missing: map[string]string{
			"dsn":   "missing: add dsn: ${ORDERS_DSN} and export ORDERS_DSN=postgres://user:password@host:5432/db",
			"table": "missing: the table to upsert into",
		}},
	{Type: SinkSQLite, Summary: "table in a local SQLite database file, with the postgres sink's semantics",
		Required: []string{"path", "table"}, Service: "database",
		missing: map[string]string{
			"path":  "missing: the database file, e.g. out/orders.db (created when missing)",
			"table": "missing: the table to upsert into",
		}},
	{Type: SinkKafka, Summary: "Kafka topic, on the source cluster or another, with provenance headers",
		Required: []string{"brokers", "topic"}, Shared: true,
		missing: map[string]string{
			"brokers": `missing: list the target cluster's bootstrap brokers, e.g. ["kafka-1:9092"] or ["${TARGET_KAFKA_BROKERS}"]`,
			"topic":   "missing: the topic to produce to (it must exist: replay does not create topics)",
		}},
	{Type: SinkHTTP, Summary: "HTTP endpoint, batches POSTed as JSON arrays with an Idempotency-Key header",
		Required: []string{"url"}, Shared: true, Service: "service",
		missing: map[string]string{
			"url": "missing: the endpoint to POST to, e.g. https://orders.internal/api/replay or ${ORDERS_API_URL}",
		}},
	{Type: SinkStdout, Summary: "JSONL on standard output, for previews and pipes"},
}

// SinkTypes returns the descriptors of the sink types this version
// implements, in the order messages list them. The result is the caller's
// to change.
func SinkTypes() []SinkDescriptor {
	out := make([]SinkDescriptor, len(sinkDescriptors))
	for i, d := range sinkDescriptors {
		out[i] = d.clone()
	}
	return out
}

// LookupSinkType returns the descriptor of the sink type t; false when this
// version does not implement t.
func LookupSinkType(t SinkType) (SinkDescriptor, bool) {
	i := slices.IndexFunc(sinkDescriptors, func(d SinkDescriptor) bool { return d.Type == t })
	if i < 0 {
		return SinkDescriptor{}, false
	}
	return sinkDescriptors[i].clone(), true
}

// SinkFields returns the descriptors of every field of a sink: the fields
// every type takes first, then the type-specific ones. The result is the
// caller's to change.
func SinkFields() []FieldDescriptor {
	out := make([]FieldDescriptor, len(sinkFieldTable))
	for i, f := range sinkFieldTable {
		f.Types = slices.Clone(f.Types)
		out[i] = f
	}
	return out
}

// clone returns a copy of d that shares nothing the caller can change, with
// its Fields.
func (d SinkDescriptor) clone() SinkDescriptor {
	d.Required = slices.Clone(d.Required)
	d.Fields = fieldsOf(d.Type)
	return d // missing is never changed: sharing it is safe
}

// fieldsOf returns the type-specific fields sink type t takes.
func fieldsOf(t SinkType) []string {
	var out []string
	for _, f := range sinkFieldTable {
		if slices.Contains(f.Types, t) {
			out = append(out, f.Name)
		}
	}
	return out
}

// sinkTypeNames returns the implemented sink types, in descriptor order.
func sinkTypeNames() []SinkType {
	out := make([]SinkType, len(sinkDescriptors))
	for i, d := range sinkDescriptors {
		out[i] = d.Type
	}
	return out
}

// SharedSinkTypes returns the sink types whose output several processes
// can write at once (SinkDescriptor.Shared), in descriptor order.
func SharedSinkTypes() []SinkType {
	var out []SinkType
	for _, d := range sinkDescriptors {
		if d.Shared {
			out = append(out, d.Type)
		}
	}
	return out
}

// typeStrings returns the sink types as strings.
func typeStrings(ts []SinkType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
