package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldKind is the record field a sink column takes its value from.
type FieldKind int

// The record fields a column can map to (sink.columns).
const (
	// FieldKey is the idempotency key (sink.key).
	FieldKey FieldKind = iota + 1
	// FieldKafkaKey is the record's Kafka key as text.
	FieldKafkaKey
	// FieldValue is the value as JSON: the document, or a string for a
	// value that is not JSON; null for a tombstone.
	FieldValue
	// FieldValuePath is value.<path>: what the gjson path selects in a JSON
	// value; null when the value is not JSON or the path selects nothing.
	FieldValuePath
	// FieldHeader is header.<name>: the last value of that header.
	FieldHeader
	// FieldHeaders is every header, as a JSON array of {"key","value"}.
	FieldHeaders
	FieldTimestamp
	FieldPartition
	FieldOffset
	FieldTopic
	// FieldTimestampType is the record's timestamp type (KIP-32):
	// "CreateTime" or "LogAppendTime".
	FieldTimestampType
)

// Field is a parsed column field: its kind and, for value.<path> and
// header.<name>, the path or name.
type Field struct {
	Kind FieldKind
	Arg  string
}

// plainFields are the fields without an argument, by name.
var plainFields = map[string]FieldKind{
	"key": FieldKey, "kafka_key": FieldKafkaKey, "value": FieldValue, "headers": FieldHeaders,
	"timestamp": FieldTimestamp, "partition": FieldPartition, "offset": FieldOffset, "topic": FieldTopic,
	"timestamp_type": FieldTimestampType,
}

// PlainFields returns the names of the fields without an argument
// (key, timestamp, ...), sorted: with value.<path> and header.<name>, what
// a column can map to (ParseField).
func PlainFields() []string {
	return slices.Sorted(maps.Keys(plainFields))
}

// fieldNames lists what a column can map to, for messages.
const fieldNames = "key, kafka_key, value, value.<path>, header.<name>, headers, timestamp, timestamp_type, partition, offset or topic"

// ParseField parses a column's field: key, kafka_key, value,
// value.<gjson path> (value.customer.id), header.<name>, headers,
// timestamp, timestamp_type, partition, offset or topic.
func ParseField(s string) (Field, error) {
	if k, ok := plainFields[s]; ok {
		return Field{Kind: k}, nil
	}
	if path, ok := strings.CutPrefix(s, "value."); ok && strings.TrimSpace(path) != "" {
		return Field{Kind: FieldValuePath, Arg: path}, nil
	}
	if name, ok := strings.CutPrefix(s, "header."); ok && name != "" {
		return Field{Kind: FieldHeader, Arg: name}, nil
	}
	switch s {
	case "value.":
		return Field{}, errors.New(`"value." needs a path after the dot, e.g. value.customer.id (or value for the whole value)`)
	case "header.":
		return Field{}, errors.New(`"header." needs a header name after the dot, e.g. header.trace-id (or headers for all of them)`)
	}
	return Field{}, fmt.Errorf("unknown field %q: want %s%s", s, fieldNames, meant(SuggestField(s)))
}

// SuggestField returns the record field s is probably a typo of, for "did
// you mean" hints: a plain field, or a misspelt value./header. prefix
// ("values.id", "headers.trace"); "" when none is close.
func SuggestField(s string) string {
	if prefix, rest, ok := strings.Cut(s, "."); ok && rest != "" {
		if p := Suggest(prefix, []string{"value", "header"}); p != "" {
			return p + "." + rest
		}
		return ""
	}
	return Suggest(s, PlainFields()) // sorted: the hint must not depend on map order
}

// Column is one output column of a sink: a table column or a CSV column.
type Column struct {
	// Name is the column's name: a plain SQL name (folded to lower case) for
	// a database sink, the header of a CSV file.
	Name string
	// Field is the record field it holds; see ParseField.
	Field string
	// pos is where the column is written in the plan.
	pos Pos
}

// Columns maps output columns to record fields (sink.columns), in the order
// the plan writes them (that of the CSV columns and of a created table's).
type Columns []Column

// UnmarshalYAML reads a mapping of column name to field name.
func (c *Columns) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping of column name to record field, e.g. {order_id: value.id, status: value.status}, got %s", describe(n))
	}
	out := Columns{}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return errorAt(k, "a column name must be a non-empty string")
		}
		if line, dup := seen[k.Value]; dup {
			return errorAt(k, "column %q is listed twice (first at line %d): keep one", k.Value, line)
		}
		seen[k.Value] = k.Line
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return errorAt(v, "column %s: want a record field (%s), got %s", k.Value, fieldNames, describe(v))
		}
		out = append(out, Column{Name: k.Value, Field: v.Value, pos: Pos{v.Line, v.Column}})
	}
	if len(out) == 0 {
		return errors.New("no columns: map at least one column to a record field, or remove columns for the default layout")
	}
	*c = out
	return nil
}

// MarshalYAML writes the columns as a mapping, in order.
func (c Columns) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, col := range c {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: col.Name}, &yaml.Node{Kind: yaml.ScalarNode, Value: col.Field})
	}
	return n, nil
}

// String is the columns as name=field pairs, for the fingerprint.
func (c Columns) String() string {
	parts := make([]string, len(c))
	for i, col := range c {
		parts[i] = col.Name + "=" + col.Field
	}
	return strings.Join(parts, ",")
}
