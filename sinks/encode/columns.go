package encode

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// Column is one output column of a table or a CSV file: its name and the
// record field it holds (plan.ParseField).
type Column struct {
	Name  string
	Field plan.Field
}

// ParseColumns parses a column mapping; none gives def. sqlNames folds the
// names to lower case, as SQL folds unquoted names. An error names the
// column whose field does not parse.
func ParseColumns(cols plan.Columns, def []Column, sqlNames bool) ([]Column, error) {
	if len(cols) == 0 {
		return def, nil
	}
	out := make([]Column, 0, len(cols))
	for _, c := range cols {
		f, err := plan.ParseField(c.Field)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		name := c.Name
		if sqlNames {
			name = ASCIILower(name)
		}
		out = append(out, Column{Name: name, Field: f})
	}
	return out, nil
}

// KeyColumn returns the index of the one column of cols that holds the
// idempotency key (isKey), which a database sink needs as its conflict
// target; an error naming the columns (name) when none or more than one
// does.
func KeyColumn[C any](cols []C, isKey func(C) bool, name func(C) string) (int, error) {
	at := -1
	for i, c := range cols {
		if !isKey(c) {
			continue
		}
		if at >= 0 {
			return -1, fmt.Errorf("columns %s and %s both hold the idempotency key: map key to one column", name(cols[at]), name(c))
		}
		at = i
	}
	if at < 0 {
		return -1, errors.New("no column holds the idempotency key: map one to key")
	}
	return at, nil
}

// UsesKey reports whether a column holds the idempotency key.
func UsesKey(cols []Column) bool {
	return slices.ContainsFunc(cols, func(c Column) bool { return c.Field.Kind == plan.FieldKey })
}

// NotNull reports whether the field always has a value.
func (c Column) NotNull() bool {
	switch c.Field.Kind {
	case plan.FieldKey, plan.FieldTopic, plan.FieldPartition, plan.FieldOffset, plan.FieldTimestamp, plan.FieldTimestampType, plan.FieldHeaders:
		return true
	}
	return false
}

// Cells computes the column values of one record, parsing its value once.
// Set Record and Key (the record's idempotency key, for a key column) and
// call Text for each column; the zero value of the other fields is ready.
type Cells struct {
	Record *record.Record
	Key    string
	// Alias lets Text return a value.<path>'s text pointing into the
	// record's value, for a caller that copies it before the value's bytes
	// are used again.
	Alias  bool
	doc    []byte // the value cleaned (appendCleanJSON) when it is JSON
	parsed bool   // doc was computed
}

// Text returns the value of c for the record as text, and false for NULL
// (a CSV file writes it as an empty field):
//
//   - key: the idempotency key; kafka_key: the Kafka key; topic
//   - value: the value as JSON (the document, or a JSON string for a value
//     that is not JSON; the decoded value when the decode stage decoded
//     it); headers: a JSON array of {"key","value"}
//   - value.<path>: what the gjson path selects in a JSON (or decoded) value: a string
//     as its text, a number as written, true or false, an object or array as
//     JSON; NULL when the value is not JSON or the path selects nothing or null
//   - header.<name>: the last value of that header; NULL when absent
//   - timestamp: RFC 3339 in UTC with milliseconds; timestamp_type:
//     CreateTime or LogAppendTime; partition, offset: decimal
//
// Bytes that are not UTF-8 in keys and header values become U+FFFD (the
// idempotency key is taken as it is: it is the row's identity).
func (cs *Cells) Text(c Column) (string, bool) {
	r := cs.Record
	switch c.Field.Kind {
	case plan.FieldKey:
		return cs.Key, true
	case plan.FieldKafkaKey:
		if r.Key == nil {
			return "", false
		}
		return ValidUTF8(r.Key), true
	case plan.FieldValue:
		return ValueJSON(r.JSONValue())
	case plan.FieldValuePath:
		return cs.path(c.Field.Arg)
	case plan.FieldHeader:
		if h, _ := r.LastHeader(c.Field.Arg); h != nil {
			return ValidUTF8(h), true
		}
		return "", false
	case plan.FieldHeaders:
		return string(AppendHeadersJSON(nil, r.Headers)), true
	case plan.FieldTimestamp:
		return string(AppendTimestamp(nil, r.Time)), true
	case plan.FieldTimestampType:
		return r.TimestampType.String(), true
	case plan.FieldPartition:
		return strconv.FormatInt(int64(r.Partition), 10), true
	case plan.FieldOffset:
		return strconv.FormatInt(r.Offset, 10), true
	case plan.FieldTopic:
		return r.Topic, true
	}
	return "", false
}

func (cs *Cells) path(p string) (string, bool) {
	if !cs.parsed {
		cs.parsed = true
		if v := cs.Record.JSONValue(); jsonscan.Valid(v) {
			cs.doc = cleanJSON(v)
		}
	}
	if cs.doc == nil {
		return "", false
	}
	if SimplePath(p) {
		raw, found, ok := findTop(cs.doc, p)
		switch {
		case ok && !found:
			return "", false
		case ok:
			return topText(cs.doc, raw, p, cs.Alias)
		}
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

// ValueJSON is a value as JSON text: the value when it is one JSON document
// (invalid UTF-8 in it replaced by U+FFFD), else the value as a JSON string
// (the encoding of AppendJSONL), and false (NULL) for a tombstone.
func ValueJSON(v []byte) (string, bool) {
	switch {
	case v == nil:
		return "", false
	case jsonscan.Valid(v):
		return string(appendCleanJSON(nil, v)), true
	default:
		return string(AppendJSONBytes(nil, v)), true
	}
}

// ASCIILower folds A-Z to a-z and leaves every other byte, as SQL folds
// unquoted names.
func ASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ValidUTF8 returns b as a string with each byte that is not UTF-8
// replaced by U+FFFD, as the JSON encodings replace them.
func ValidUTF8(b []byte) string {
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
