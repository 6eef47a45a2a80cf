package decode

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/replay-tool/replay/internal/decode/avro"
	"github.com/replay-tool/replay/internal/decode/protobuf"
)

// Column is one top-level field of a decoded value as a typed column: its
// name, and the type its rendered JSON converts to exactly, in the
// vocabulary of the parquet sink's types (string, base64, int32, int64,
// uint64, boolean, float, double, decimal(P,S), date, time_millis,
// time_micros, timestamp_millis, timestamp_micros).
type Column struct {
	Name, Type string
}

// Columns returns the columns of the value b's schema names (b framed in
// the Confluent wire format; for Protobuf, the message its indexes name):
// one per top-level field of the record or message, in the schema's
// order. A field whose rendering has no exact column type (a nested
// record, an array, a map, a union of several types, a nanosecond or
// local timestamp) is a string column of its JSON text. The columns of a
// schema are computed once, and each later call returns the same slice.
//
// A value that cannot be framed, or a schema id the registry does not
// have, is a *BadRecordError (as in Decode); a schema whose value is not
// a record or message, or a JSON Schema, is a *ColumnsError: its values
// have no columns to derive.
func (d *Decoder) Columns(ctx context.Context, b []byte) ([]Column, error) {
	id, c, err := d.framed(ctx, Value, b)
	if err != nil {
		return nil, err
	}
	// A Protobuf value's columns are those of the message its indexes
	// name: the index bytes key the cache (looked up without a copy).
	var idx []int
	var key []byte
	if c.typ == TypeProtobuf {
		var rest []byte
		if idx, rest, err = protobuf.ReadIndexes(b[5:]); err != nil {
			return nil, &BadRecordError{Side: Value, SchemaID: id, Reason: err.Error()}
		}
		key = b[5 : len(b)-len(rest)]
	}
	c.colsMu.Lock()
	defer c.colsMu.Unlock()
	if cols, ok := c.cols[string(key)]; ok {
		return cols.cols, cols.err
	}
	var cols []Column
	switch c.typ {
	case TypeAvro:
		cols, err = avroColumns(c.avro, d.opts.TaggedUnions)
	case TypeProtobuf:
		var md protoreflect.MessageDescriptor
		if md, err = c.proto.Message(idx); err == nil {
			cols = protoColumns(md)
		}
	default:
		err = fmt.Errorf("a %s schema", c.typ)
	}
	if err != nil {
		err = &ColumnsError{SchemaID: id, Reason: err.Error()}
	}
	if c.cols == nil {
		c.cols = map[string]columnsOf{}
	}
	c.cols[string(key)] = columnsOf{cols, err}
	return cols, err
}

// ColumnsError is a schema whose values have no columns (Columns).
type ColumnsError struct {
	SchemaID int32
	Reason   string
}

func (e *ColumnsError) Error() string {
	return fmt.Sprintf("schema id %d: %s, whose fields give no columns: list the columns the sink writes (columns:)", e.SchemaID, e.Reason)
}

// columnsOf is the outcome of Columns for one schema (and message).
type columnsOf struct {
	cols []Column
	err  error
}

// columnsCache holds a compiled schema's columns, by message index.
type columnsCache struct {
	colsMu sync.Mutex
	cols   map[string]columnsOf
}

// avroColumns returns the columns of s, which must be a record.
func avroColumns(s *avro.Schema, tagged bool) ([]Column, error) {
	if s.Kind != avro.Record {
		return nil, fmt.Errorf("an Avro schema of type %s, not a record", s.Kind)
	}
	cols := make([]Column, 0, len(s.Fields))
	for _, f := range s.Fields {
		cols = append(cols, Column{Name: f.Name, Type: avroType(f.Type, tagged)})
	}
	return cols, nil
}

// avroType is the column type of an Avro field's rendering.
func avroType(s *avro.Schema, tagged bool) string {
	if s.Kind == avro.Union {
		if tagged || len(s.Branches) != 2 {
			return "string"
		}
		// A union of null and one type is that type, nullable.
		switch {
		case s.Branches[0].Kind == avro.Null:
			return avroType(s.Branches[1], tagged)
		case s.Branches[1].Kind == avro.Null:
			return avroType(s.Branches[0], tagged)
		}
		return "string"
	}
	switch {
	case s.Logical == avro.Decimal && s.Precision <= 38:
		return "decimal(" + strconv.Itoa(s.Precision) + "," + strconv.Itoa(s.Scale) + ")"
	case s.Logical != avro.None: // a wider decimal, a uuid, a nanosecond or local timestamp: string
		return cmp.Or(avroLogicalTypes[s.Logical], "string")
	}
	// string, enum, null; record, array and map as JSON text: string
	return cmp.Or(avroKindTypes[s.Kind], "string")
}

// avroLogicalTypes and avroKindTypes are the column types of Avro's
// logical and plain types; those missing are strings.
var (
	avroLogicalTypes = map[avro.Logical]string{avro.Date: "date", avro.TimeMillis: "time_millis", avro.TimeMicros: "time_micros",
		avro.TimestampMillis: "timestamp_millis", avro.TimestampMicros: "timestamp_micros"}
	avroKindTypes = map[avro.Kind]string{avro.Boolean: "boolean", avro.Int: "int32", avro.Long: "int64", avro.Float: "float",
		avro.Double: "double", avro.Bytes: "base64", avro.Fixed: "base64"}
)

// protoColumns returns the columns of md's fields.
func protoColumns(md protoreflect.MessageDescriptor) []Column {
	fields := md.Fields()
	cols := make([]Column, 0, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		cols = append(cols, Column{Name: string(fd.Name()), Type: protoType(fd)})
	}
	return cols
}

// protoType is the column type of a Protobuf field's rendering.
func protoType(fd protoreflect.FieldDescriptor) string {
	if fd.IsList() || fd.IsMap() {
		return "string"
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "boolean"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "int32"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "int64"
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "uint64"
	case protoreflect.FloatKind:
		return "float"
	case protoreflect.DoubleKind:
		return "double"
	case protoreflect.BytesKind:
		return "base64"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoMessageType(fd.Message())
	}
	return "string" // string; an enum by name (an unknown number as its digits)
}

// protoMessageType is the column type of a message field: a wrapper of a
// scalar (google.protobuf.Int64Value) is the scalar's; any other message
// is its JSON text (google.protobuf.Timestamp's text has nanoseconds,
// which no Parquet timestamp that Spark and Athena read holds).
func protoMessageType(md protoreflect.MessageDescriptor) string {
	switch name := md.FullName(); {
	case strings.HasPrefix(string(name), "google.protobuf.") && strings.HasSuffix(string(name), "Value") &&
		name != "google.protobuf.Value" && name != "google.protobuf.ListValue":
		return protoType(md.Fields().ByName("value"))
	}
	return "string"
}
