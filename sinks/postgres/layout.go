package postgres

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// The default layout: the table a plan without columns writes, one row per
// idempotency key. value_bytes and kafka_key hold the exact bytes; value is
// the value as jsonb when it is JSON PostgreSQL takes (else NULL), for
// queries; headers keeps every header, binary values and repeated keys
// included.
var defaultLayout = []pgColumn{
	{name: "key", field: plan.Field{Kind: plan.FieldKey}},
	{name: "topic", field: plan.Field{Kind: plan.FieldTopic}},
	{name: "partition", field: plan.Field{Kind: plan.FieldPartition}},
	{name: "offset", field: plan.Field{Kind: plan.FieldOffset}},
	{name: "timestamp", field: plan.Field{Kind: plan.FieldTimestamp}},
	{name: "value", field: plan.Field{Kind: plan.FieldValue}, jsonOrNull: true},
	{name: "value_bytes", field: plan.Field{Kind: plan.FieldValue}, bytes: true},
	{name: "kafka_key", field: plan.Field{Kind: plan.FieldKafkaKey}, bytes: true},
	{name: "headers", field: plan.Field{Kind: plan.FieldHeaders}},
}

// versionColumn is the column the default layout (or a mapping without a
// column of the version's field) keeps the version in.
const versionColumn = "replay_version"

// pgColumn is one column the sink writes: the record field it holds, the
// type the table declares, and how its values are sent.
type pgColumn struct {
	name  string
	field plan.Field
	// jsonOrNull: the value as jsonb when it is JSON PostgreSQL takes,
	// else NULL (the default layout's value; its bytes are in value_bytes).
	jsonOrNull bool
	// bytes: created as bytea (value_bytes, kafka_key).
	bytes bool
	// schemaID: the schema id the side of field (the value, the Kafka key)
	// was decoded by, NULL when it was not (value_schema_id, key_schema_id).
	schemaID bool
	// decoded: a jsonOrNull column of a side the plan decodes (value,
	// kafka_key_json): the change test compares it, since it depends on
	// how the plan decodes as well as on the bytes.
	decoded bool
	decl    declType
	send    sendKind
}

// declType is a column's declared type as pg_attribute has it.
type declType struct {
	sql    string // format_type: varchar(10), numeric(8,2), ...
	base   string // pg_type.typname: varchar, numeric, int4, ... (a domain's base type)
	typmod int32
	domain bool // the column's type is a domain over base
}

// sendKind is the type a column's values travel in (the COPY table's
// column type, the arrays' element type).
type sendKind int

const (
	sendText sendKind = iota
	sendBytes
	sendJSON
	sendTime
	sendInt4
	sendInt8
	// sendJSONText: JSON for a jsonb column that the change test does not
	// compare (the default layout's value, a function of value_bytes),
	// sent as text and cast to jsonb in the INSERT: a re-run's rows that
	// the change test leaves out are never parsed as JSON.
	sendJSONText
)

func (k sendKind) sql() string {
	return [...]string{"text", "bytea", "jsonb", "timestamptz", "int4", "int8", "text"}[k]
}

// createType is the type create_table gives a column of the field.
func (c pgColumn) createType() string {
	switch {
	case c.schemaID:
		return "integer"
	case c.jsonOrNull:
		return "jsonb"
	case c.bytes, c.field.Kind == plan.FieldKafkaKey:
		return "bytea"
	case c.field.Kind == plan.FieldTimestamp:
		return "timestamptz"
	case c.field.Kind == plan.FieldPartition:
		return "int"
	case c.field.Kind == plan.FieldOffset:
		return "bigint"
	case c.field.Kind == plan.FieldValue, c.field.Kind == plan.FieldHeaders,
		c.name == versionColumn && (c.field.Kind == plan.FieldValuePath || c.field.Kind == plan.FieldHeader):
		return "jsonb"
	}
	return "text"
}

// notNull reports whether the field always has a value.
func (c pgColumn) notNull() bool {
	return encode.Column{Name: c.name, Field: c.field}.NotNull() && !c.bytes
}

func (c pgColumn) quoted() string { return pgx.Identifier{c.name}.Sanitize() }

// chooseSend picks how the column's values travel, given its declared type.
func (c *pgColumn) chooseSend() {
	k := c.field.Kind
	if c.schemaID {
		c.send = sendText // cast to the column's integer type
		return
	}
	switch c.decl.base {
	case "bytea":
		c.send = sendBytes
		return
	case "jsonb", "json":
		c.send = sendJSON
		if c.jsonOrNull {
			c.send = sendJSONText
		}
		return
	case "timestamptz", "timestamp", "date":
		if k == plan.FieldTimestamp {
			c.send = sendTime
			return
		}
	case "int4", "int8", "int2", "numeric":
		switch k {
		case plan.FieldPartition:
			c.send = sendInt4
			return
		case plan.FieldOffset:
			c.send = sendInt8
			return
		}
	}
	c.send = sendText
}

// sentAsDeclared reports whether the column's values travel in its
// declared type, so COPY into the table itself stores what the upsert
// stores (no cast between them).
func (c pgColumn) sentAsDeclared() bool {
	return !c.decl.domain && (c.decl.base == c.send.sql() || c.send == sendJSONText && c.decl.base == "jsonb")
}

// expr is the column's value in a row of alias (the COPY table or the
// arrays), converted to the declared type where the sent type is another.
func (c pgColumn) expr(alias string, i int) string {
	u := alias + ".c" + strconv.Itoa(i+1)
	if c.decl.base == c.send.sql() || c.send == sendText && (c.decl.base == "varchar" || c.decl.base == "bpchar") {
		return u
	}
	return u + "::" + c.decl.sql
}

// cell is one column value of one row, as sent.
type cell struct {
	text  string
	bytes []byte
	null  bool
}

// badText returns why s cannot be stored as PostgreSQL text exactly, ""
// when it can: text holds UTF-8 without NUL.
func badText(s []byte) string {
	if !utf8.Valid(s) {
		return "holds bytes that are not UTF-8"
	}
	if bytes.IndexByte(s, 0) >= 0 {
		return "holds a NUL byte"
	}
	return ""
}

// badString is badText for a string.
func badString(s string) string {
	if !utf8.ValidString(s) {
		return "holds bytes that are not UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "holds a NUL byte"
	}
	return ""
}

// valueJSON holds what jsonscan said of one record's value, so that the
// key template and the columns that read the value as JSON scan it once
// for each question: 0 not yet asked, 1 yes, -1 no.
type valueJSON struct{ valid, jsonb, noSignedZero int8 }

// check returns whether v (the record's value) is valid JSON
// (jsonscan.Valid).
func (m *valueJSON) check(v []byte) bool {
	if m.valid == 0 {
		m.valid = answer(jsonscan.Valid(v))
	}
	return m.valid > 0
}

// jsonbOK reports whether the record's value v is JSON that jsonb takes
// as it is (see jsonscan.Options.Jsonb), in valid UTF-8; decoded, v holds
// no negative zero either (a float's -0.0, which numeric stores as 0).
func (m *valueJSON) jsonbOK(v []byte, decoded bool) bool {
	if v == nil || !m.check(v) {
		return false
	}
	if m.jsonb == 0 {
		m.jsonb = answer(jsonscan.Options{UTF8: true, Jsonb: true}.Scan(v) != jsonscan.Invalid)
	}
	if m.jsonb < 0 || !decoded {
		return m.jsonb > 0
	}
	if m.noSignedZero == 0 {
		m.noSignedZero = answer(jsonscan.Options{SignedZero: true}.Scan(v) != jsonscan.Invalid)
	}
	return m.noSignedZero > 0
}

// holdsNegativeZero reports whether JSON text j, part of a value that
// passed jsonbOK, holds a number that is a negative zero (a decoded
// float's -0.0).
func holdsNegativeZero(j []byte) bool {
	return jsonscan.Options{SignedZero: true}.Scan(j) == jsonscan.Invalid
}

// answer is a kept yes (1) or no (-1).
func answer(yes bool) int8 {
	if yes {
		return 1
	}
	return -1
}

// cellOf computes the column's value for r, whose idempotency key is key.
// The error is the reason the value cannot be stored exactly.
func (c *pgColumn) cellOf(r *record.Record, key string, cs *encode.Cells, vj *valueJSON) (cell, error) {
	k := c.field.Kind
	switch c.send {
	case sendBytes:
		var b []byte
		switch k {
		case plan.FieldValue:
			b = r.Value
			if c.bytes { // value_bytes: the bytes as read, mapped or not
				b = r.OriginalValue()
			}
		case plan.FieldKafkaKey:
			b = r.Key
		case plan.FieldHeader:
			b, _ = r.LastHeader(c.field.Arg) // nil when missing
		default:
			s, ok := cs.Text(encode.Column{Name: c.name, Field: c.field})
			if !ok {
				return cell{null: true}, nil
			}
			b = []byte(s)
		}
		if b == nil {
			return cell{null: true}, nil
		}
		return cell{bytes: b}, nil
	case sendJSON, sendJSONText:
		return c.jsonCell(r, key, cs, vj)
	case sendTime, sendInt4, sendInt8:
		return cell{}, nil // taken from the record directly
	}
	var s, why string
	switch k {
	case plan.FieldKey: // strings already: no copy to bytes and back
		s, why = key, badString(key)
	case plan.FieldTopic:
		s, why = r.Topic, badString(r.Topic)
	default:
		raw, ok := c.rawText(r, key, cs, vj)
		if !ok {
			return cell{null: true}, nil
		}
		if why = badText(raw); why == "" {
			s = string(raw)
		}
	}
	if why != "" {
		return cell{}, fmt.Errorf("column %s (%s): the %s %s; map it to a bytea column to keep its bytes", c.name, c.decl.sql, fieldName(c.field), why)
	}
	if err := c.check(s); err != nil {
		return cell{}, err
	}
	if c.decl.base == "numeric" && k == plan.FieldValuePath && strings.HasPrefix(s, "-") && r.Note.DecodedOrNil() != nil {
		// numeric has no -0: a decoded float's -0.0 would be stored as 0.
		if res := gjson.GetBytes(r.JSONValue(), c.field.Arg); res.Type == gjson.Number && holdsNegativeZero([]byte(res.Raw)) {
			return cell{}, fmt.Errorf("column %s (%s): the %s is a float's -0.0, which numeric stores as 0; map it to a double precision or text column to keep its sign", c.name, c.decl.sql, fieldName(c.field))
		}
	}
	return cell{text: s}, nil
}

// rawText is the field's bytes for a text column: the key, topic, Kafka
// key and header values as they are, the value as it is, a value path's
// text, the rest as encode.Cells writes them.
func (c *pgColumn) rawText(r *record.Record, key string, cs *encode.Cells, vj *valueJSON) ([]byte, bool) {
	if c.schemaID { // the id r's value or Kafka key was decoded by
		d := r.Note.DecodedOrNil()
		switch {
		case d == nil:
			return nil, false
		case c.field.Kind == plan.FieldKafkaKey:
			return strconv.AppendInt(nil, int64(d.KeySchemaID), 10), d.Key != nil
		}
		return strconv.AppendInt(nil, int64(d.ValueSchemaID), 10), d.Value != nil
	}
	switch c.field.Kind {
	case plan.FieldKey:
		return []byte(key), true
	case plan.FieldKafkaKey:
		return r.Key, r.Key != nil
	case plan.FieldValue:
		v := r.JSONValue()
		return v, v != nil
	case plan.FieldHeader:
		h, ok := r.LastHeader(c.field.Arg)
		return h, ok && h != nil
	case plan.FieldHeaders:
		return encode.AppendHeadersJSONB(nil, r.Headers), true
	case plan.FieldValuePath:
		v := r.JSONValue()
		if v == nil || !vj.jsonbOK(v, false) { // a -0.0 elsewhere in the value leaves the path's text as it is
			return nil, false
		}
		res := gjson.GetBytes(v, c.field.Arg)
		switch res.Type {
		case gjson.Null:
			return nil, false
		case gjson.String:
			return []byte(res.Str), true
		}
		return []byte(res.Raw), true
	}
	s, ok := cs.Text(encode.Column{Name: c.name, Field: c.field})
	return []byte(s), ok
}

// jsonCell is the column's value as JSON text for a jsonb column.
func (c *pgColumn) jsonCell(r *record.Record, key string, cs *encode.Cells, vj *valueJSON) (cell, error) {
	switch c.field.Kind {
	case plan.FieldValue:
		v := r.JSONValue()
		switch {
		case v == nil:
			return cell{null: true}, nil
		case vj.jsonbOK(v, r.Note.DecodedOrNil() != nil):
			return cell{bytes: v}, nil
		case c.jsonOrNull:
			return cell{null: true}, nil
		case vj.check(v) && utf8.Valid(v):
			return cell{}, fmt.Errorf("column %s (%s): the value is JSON that jsonb cannot hold as it is (a \\u0000, a lone UTF-16 surrogate, a number beyond numeric's range, or a decoded float's -0.0); map value to a text or bytea column to keep it", c.name, c.decl.sql)
		case badText(v) == "":
			return cell{bytes: encode.AppendJSONBytes(nil, v)}, nil // text as a JSON string
		}
		return cell{}, fmt.Errorf("column %s (%s): the value is not JSON and not UTF-8 text; map value to a bytea column to keep its bytes", c.name, c.decl.sql)
	case plan.FieldHeaders:
		return cell{bytes: encode.AppendHeadersJSONB(nil, r.Headers)}, nil
	case plan.FieldKafkaKey:
		if c.jsonOrNull { // kafka_key_json: the decoded key when jsonb takes it as it is
			if d := r.Note.DecodedOrNil(); d != nil && d.Key != nil && new(valueJSON).jsonbOK(d.Key, true) {
				return cell{bytes: d.Key}, nil
			}
			return cell{null: true}, nil
		}
	case plan.FieldValuePath:
		v := r.JSONValue()
		if v == nil || !vj.jsonbOK(v, false) {
			return cell{null: true}, nil
		}
		res := gjson.GetBytes(v, c.field.Arg)
		if !res.Exists() || res.Type == gjson.Null {
			return cell{null: true}, nil
		}
		raw := []byte(res.Raw)
		if r.Note.DecodedOrNil() != nil && holdsNegativeZero(raw) {
			return cell{}, fmt.Errorf("column %s (%s): the %s holds a float's -0.0, which jsonb would store as 0; map it to a double precision or text column to keep it", c.name, c.decl.sql, fieldName(c.field))
		}
		return cell{bytes: raw}, nil
	case plan.FieldPartition:
		return cell{bytes: strconv.AppendInt(nil, int64(r.Partition), 10)}, nil
	case plan.FieldOffset:
		return cell{bytes: strconv.AppendInt(nil, r.Offset, 10)}, nil
	case plan.FieldHeader:
		h, ok := r.LastHeader(c.field.Arg)
		if !ok || h == nil {
			return cell{null: true}, nil
		}
		if c.name == versionColumn && isJSONNumber(h) {
			return cell{bytes: h}, nil // a number orders as a number
		}
	}
	raw, ok := c.rawText(r, key, cs, vj)
	if !ok {
		return cell{null: true}, nil
	}
	if why := badText(raw); why != "" {
		return cell{}, fmt.Errorf("column %s (%s): the %s %s; map it to a bytea column to keep its bytes", c.name, c.decl.sql, fieldName(c.field), why)
	}
	return cell{bytes: encode.AppendJSONBytes(nil, raw)}, nil
}

// isJSONNumber reports whether b is a JSON number, perhaps followed by
// white space.
func isJSONNumber(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9') && jsonscan.Options{}.Scan(b) == jsonscan.Number
}

// fieldName names f in messages.
func fieldName(f plan.Field) string {
	switch f.Kind {
	case plan.FieldKey:
		return "idempotency key"
	case plan.FieldKafkaKey:
		return "Kafka key"
	case plan.FieldValue:
		return "value"
	case plan.FieldValuePath:
		return "value." + f.Arg
	case plan.FieldHeader:
		return "header " + strconv.Quote(f.Arg)
	}
	return "field"
}
