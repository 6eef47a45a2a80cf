package sinks

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// column is one output column of a table or a CSV file: its name and the
// record field it holds (plan.ParseField).
type column struct {
	name  string
	field plan.Field
}

// defaultColumns is the layout of the database sinks without a column
// mapping.
var defaultColumns = []column{
	{"key", plan.Field{Kind: plan.FieldKey}},
	{"topic", plan.Field{Kind: plan.FieldTopic}},
	{"partition", plan.Field{Kind: plan.FieldPartition}},
	{"offset", plan.Field{Kind: plan.FieldOffset}},
	{"timestamp", plan.Field{Kind: plan.FieldTimestamp}},
	{"value", plan.Field{Kind: plan.FieldValue}},
	{"headers", plan.Field{Kind: plan.FieldHeaders}},
}

// parseColumns parses a column mapping; none gives def. sqlNames folds the
// names to lower case, as SQL folds unquoted names.
func parseColumns(cols plan.Columns, def []column, sqlNames bool) ([]column, error) {
	if len(cols) == 0 {
		return def, nil
	}
	out := make([]column, 0, len(cols))
	for _, c := range cols {
		f, err := plan.ParseField(c.Field)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		name := c.Name
		if sqlNames {
			name = asciiLower(name)
		}
		out = append(out, column{name: name, field: f})
	}
	return out, nil
}

// keyColumn returns the index of the column holding the idempotency key,
// which a database sink needs as its conflict target.
func keyColumn(cols []column) (int, error) {
	at := -1
	for i, c := range cols {
		if c.field.Kind == plan.FieldKey {
			if at >= 0 {
				return -1, fmt.Errorf("columns %s and %s both hold the idempotency key: map key to one column", cols[at].name, c.name)
			}
			at = i
		}
	}
	if at < 0 {
		return -1, fmt.Errorf("no column holds the idempotency key: map one to key")
	}
	return at, nil
}

// usesKey reports whether a column holds the idempotency key.
func usesKey(cols []column) bool {
	for _, c := range cols {
		if c.field.Kind == plan.FieldKey {
			return true
		}
	}
	return false
}

// notNull reports whether the field always has a value.
func (c column) notNull() bool {
	switch c.field.Kind {
	case plan.FieldKey, plan.FieldTopic, plan.FieldPartition, plan.FieldOffset, plan.FieldTimestamp, plan.FieldHeaders:
		return true
	}
	return false
}

// isJSON reports whether the field is JSON text (jsonb in PostgreSQL).
func (c column) isJSON() bool {
	return c.field.Kind == plan.FieldValue || c.field.Kind == plan.FieldHeaders
}

// cells computes the column values of one record, parsing its value once.
type cells struct {
	r   *Record
	key string
	// doc is the value cleaned (appendCleanJSON) when it is JSON; parsed
	// tells whether doc was computed.
	doc    []byte
	parsed bool
}

// text returns the value of c for the record as text, and false for NULL
// (a CSV file writes it as an empty field):
//
//   - key: the idempotency key; kafka_key: the Kafka key; topic
//   - value: the value as JSON (the document, or a JSON string for a value
//     that is not JSON); headers: a JSON array of {"key","value"}
//   - value.<path>: what the gjson path selects in a JSON value: a string
//     as its text, a number as written, true or false, an object or array as
//     JSON; NULL when the value is not JSON or the path selects nothing or null
//   - header.<name>: the last value of that header; NULL when absent
//   - timestamp: RFC 3339 in UTC with milliseconds; partition, offset: decimal
//
// Bytes that are not UTF-8 in keys and header values become U+FFFD (the
// idempotency key is taken as it is: it is the row's identity).
func (cs *cells) text(c column) (string, bool) {
	r := cs.r
	switch c.field.Kind {
	case plan.FieldKey:
		return cs.key, true
	case plan.FieldKafkaKey:
		if r.Key == nil {
			return "", false
		}
		return validUTF8(r.Key), true
	case plan.FieldValue:
		v := pgValue(r.Value)
		return v.String, v.Valid
	case plan.FieldValuePath:
		return cs.path(c.field.Arg)
	case plan.FieldHeader:
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if h := r.Headers[i]; h.Key == c.field.Arg {
				if h.Value == nil {
					return "", false
				}
				return validUTF8(h.Value), true
			}
		}
		return "", false
	case plan.FieldHeaders:
		return pgHeaders(r.Headers), true
	case plan.FieldTimestamp:
		return string(appendTimestamp(nil, r.Time)), true
	case plan.FieldPartition:
		return strconv.FormatInt(int64(r.Partition), 10), true
	case plan.FieldOffset:
		return strconv.FormatInt(r.Offset, 10), true
	case plan.FieldTopic:
		return r.Topic, true
	}
	return "", false
}

func (cs *cells) path(p string) (string, bool) {
	if !cs.parsed {
		cs.parsed = true
		if v := cs.r.Value; v != nil && isJSON(v) {
			cs.doc = appendCleanJSON(nil, v)
		}
	}
	if cs.doc == nil {
		return "", false
	}
	res := gjson.GetBytes(cs.doc, p)
	switch res.Type {
	case gjson.Null:
		return "", false
	case gjson.String:
		return res.Str, true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	}
	return res.Raw, true // a number as written, an object or array as JSON
}

// isJSON reports whether v is one valid JSON document.
func isJSON(v []byte) bool { return record.ValidJSON(v) }

// validUTF8 returns b as a string with each byte that is not UTF-8
// replaced by U+FFFD, as the JSON encodings replace them.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}
