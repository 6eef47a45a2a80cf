package sqlite

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// ErrChanged is wrapped by the *record.Error of a record one of whose
// values the target column would store changed (SQLite's type affinity
// converting "007" to 7 or "1e3" to 1000, an integer beyond 64 bits, one a
// REAL column would round). The message names the column.
var ErrChanged = errors.New("the column would not store the value as it is")

// ErrNoVersion is wrapped by the *record.Error of a record that has no
// value for the version field (sink.version) and is not a tombstone to
// delete: a guarded upsert cannot order it.
var ErrNoVersion = errors.New("the record has no version")

// cellError is the *record.Error of r for column c.
func cellError(r *record.Record, c *column, format string, args ...any) error {
	return record.NewError(r, fmt.Errorf("sqlite sink: column %s: %s: %w", c.name, fmt.Sprintf(format, args...), ErrChanged))
}

// arena holds the text cells of one batch. Strings cut from it (and from
// the records' bytes) are not copies: they live while the batch's Write
// runs, and bytes once handed out are never written again (a full chunk
// is replaced, not reused).
type arena struct{ buf []byte }

// text returns the bytes appended by f as a string that shares them.
func (a *arena) text(f func([]byte) []byte) string {
	if cap(a.buf)-len(a.buf) < 512 {
		a.buf = make([]byte, 0, 64<<10)
	}
	start := len(a.buf)
	a.buf = f(a.buf)
	return bytesString(a.buf[start:])
}

// bytesString is b as a string without a copy; b must not change while the
// string is used (record bytes do not change during a Write).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// cell is r's value for column c as bound to the statement: nil (NULL), a
// string (TEXT), []byte (BLOB) or int64/float64; or the *record.Error of
// a value the column would change (see Sink for the rules).
func cell(c *column, r *record.Record, key string, a *arena) (any, error) {
	switch c.form {
	case formJSONOnly:
		if (jsonscan.Options{UTF8: true}).Scan(r.Value) != jsonscan.Invalid {
			return bytesString(r.Value), nil
		}
		return nil, nil
	case formDecoded: // TEXT when UTF-8, else NULL (the bytes column keeps the record's)
		if v, _ := decodedOf(r, c.field.Kind); v != nil && utf8.Valid(v) {
			return bytesString(v), nil
		}
		return nil, nil
	case formSchemaID:
		if v, id := decodedOf(r, c.field.Kind); v != nil {
			return int64(id), nil
		}
		return nil, nil
	case formVersion:
		v, err := versionCell(c, r)
		if err != nil || v == nil {
			return v, err
		}
		if s, ok := v.(string); ok {
			return textCell(c, r, s)
		}
		return v, nil
	}
	switch c.field.Kind {
	case plan.FieldKey:
		return textCell(c, r, key)
	case plan.FieldTopic:
		return textCell(c, r, r.Topic)
	case plan.FieldTimestampType:
		return textCell(c, r, r.TimestampType.String())
	case plan.FieldPartition:
		return intCell(c, r, int64(r.Partition))
	case plan.FieldOffset:
		return intCell(c, r, r.Offset)
	case plan.FieldTimestamp:
		return a.text(func(b []byte) []byte { return encode.AppendTimestamp(b, r.Time) }), nil
	case plan.FieldHeaders:
		if len(r.Headers) == 0 {
			return "[]", nil
		}
		return a.text(func(b []byte) []byte { return encode.AppendHeadersJSON(b, r.Headers) }), nil
	case plan.FieldKafkaKey:
		return bytesCell(c, r, r.Key)
	case plan.FieldHeader:
		h, _ := r.LastHeader(c.field.Arg)
		return bytesCell(c, r, h)
	case plan.FieldValue:
		return valueCell(c, r)
	case plan.FieldValuePath:
		return valuePathCell(c, r)
	}
	return nil, nil
}

// valueCell is the cell of a column of the whole value.
func valueCell(c *column, r *record.Record) (any, error) {
	if r.Value == nil {
		return nil, nil
	}
	if c.original {
		return r.OriginalValue(), nil // value_bytes: a BLOB
	}
	if c.aff == affBlob {
		return r.Value, nil
	}
	v := r.JSONValue()
	if !utf8.Valid(v) {
		return v, nil // a BLOB: SQLite converts no BLOB, whatever the affinity
	}
	if jsonscan.Valid(v) {
		return textCell(c, r, bytesString(v))
	}
	return string(encode.AppendJSONBytes(nil, v)), nil // a JSON string: never numeric text
}

// valuePathCell is the cell of a column of a path into the value.
func valuePathCell(c *column, r *record.Record) (any, error) {
	res, ok := valuePath(r, c.field.Arg)
	if !ok {
		return nil, nil
	}
	s := res.Raw
	if res.Type == gjson.String {
		s = res.Str
	}
	if c.aff == affBlob && res.Type == gjson.String || !utf8.ValidString(s) {
		return []byte(s), nil
	}
	return textCell(c, r, s)
}

// valuePath is what the gjson path selects in r's value; false when the
// value is not JSON or the path selects nothing or null.
func valuePath(r *record.Record, path string) (gjson.Result, bool) {
	v := r.JSONValue()
	if !jsonscan.Valid(v) {
		return gjson.Result{}, false
	}
	res := gjson.GetBytes(v, path)
	if !res.Exists() || res.Type == gjson.Null {
		return gjson.Result{}, false
	}
	return res, true
}

// bytesCell is b (a key or header value) bound as a BLOB in a BLOB column
// or when it is not UTF-8, else as text.
func bytesCell(c *column, r *record.Record, b []byte) (any, error) {
	switch {
	case b == nil:
		return nil, nil
	case c.aff == affBlob, !utf8.Valid(b):
		return b, nil
	}
	return textCell(c, r, bytesString(b))
}

// intCell is n for column c: a REAL column holds integers up to 2^53
// exactly.
func intCell(c *column, r *record.Record, n int64) (any, error) {
	if c.aff == affReal && (n > 1<<53 || n < -(1<<53)) {
		return nil, cellError(r, c, "a REAL column would round %d", n)
	}
	return n, nil
}

// textCell is s for column c. A TEXT or BLOB column keeps text as it is;
// a column with INTEGER, REAL or NUMERIC affinity converts text that reads
// as a number, so such text is bound only when the number stores as the
// same text (a canonical integer within 64 bits; a plain decimal of at
// most 15 significant digits; in a REAL column an integer up to 2^53 too),
// as that number; anything else ("007", "1e3", "+1", " 5", 2^63) is a
// *record.Error. Text that does not read as a number is stored as text.
func textCell(c *column, r *record.Record, s string) (any, error) {
	if c.aff == affText || c.aff == affBlob || !looksNumeric(s) {
		return s, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
		if c.aff == affReal {
			return intCell(c, r, n)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err == nil && plainDecimal(s, f, c.aff) {
		return f, nil
	}
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange):
		return nil, cellError(r, c, "a %s column would store %q as an infinite or zero REAL", c.aff, excerpt(s))
	case err == nil && f == math.Trunc(f) && c.aff != affReal && math.Abs(f) < 1<<63:
		return nil, cellError(r, c, "a %s column would store %q as the integer %s", c.aff, excerpt(s), strconv.FormatFloat(f, 'f', -1, 64))
	case err == nil:
		// SQLite writes a REAL back with 15 significant digits (%!.15g).
		return nil, cellError(r, c, "a %s column would store %q as a REAL that reads back as %s; map it to a TEXT column to keep it as written", c.aff, excerpt(s), strconv.FormatFloat(f, 'g', 15, 64))
	}
	return nil, cellError(r, c, "a %s column would store %q as a number", c.aff, excerpt(s))
}

// plainDecimal reports whether s is f written as SQLite writes a REAL
// back: digits, a point, digits, at most 15 significant digits, with the
// magnitude printed without an exponent; in a NUMERIC or INTEGER column
// an integral value is stored as an integer, so it does not qualify.
func plainDecimal(s string, f float64, aff affinity) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) || !strings.Contains(s, ".") {
		return false
	}
	a := math.Abs(f)
	if a != 0 && (a < 1e-4 || a >= 1e15) {
		return false
	}
	digits := 0
	for _, ch := range strings.TrimLeft(strings.ReplaceAll(strings.TrimPrefix(s, "-"), ".", ""), "0") {
		if ch >= '0' && ch <= '9' {
			digits++
		}
	}
	if digits > 15 {
		return false
	}
	if f == math.Trunc(f) {
		return aff == affReal && s == strconv.FormatFloat(f, 'f', 1, 64)
	}
	return s == strconv.FormatFloat(f, 'f', -1, 64)
}

// looksNumeric reports whether SQLite's numeric affinity could take s for
// a number: optional white space, a sign, digits with an optional point
// (or a point and digits), an optional exponent, white space. It errs on
// the side of yes (such text is then checked, not converted blindly).
func looksNumeric(s string) bool {
	s = strings.Trim(s, " \t\n\v\f\r")
	if s == "" {
		return false
	}
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	digits := 0
	i := 0
	for ; i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_'); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// versionCell is r's version (sink.version), bound so that SQLite orders
// versions as the plan means: offsets as integers, timestamps as RFC 3339
// text in UTC with milliseconds (text order is time order), a JSON number
// of the value as an integer (or a REAL when it has a fraction), a JSON
// string as text, a header as an integer when it is a canonical decimal
// integer, else as text (BLOB when not UTF-8). nil when the record has
// none; a *record.Error for a version that cannot be ordered.
func versionCell(c *column, r *record.Record) (any, error) {
	switch c.field.Kind {
	case plan.FieldOffset:
		return r.Offset, nil
	case plan.FieldTimestamp:
		return string(encode.AppendTimestamp(nil, r.Time)), nil
	case plan.FieldHeader:
		h, _ := r.LastHeader(c.field.Arg)
		if h == nil {
			return nil, nil
		}
		s := string(h)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
			return n, nil
		}
		if !utf8.ValidString(s) {
			return h, nil
		}
		return s, nil
	case plan.FieldValuePath:
		res, ok := valuePath(r, c.field.Arg)
		if !ok {
			return nil, nil
		}
		switch res.Type {
		case gjson.String:
			return res.Str, nil
		case gjson.Number:
			if n, err := strconv.ParseInt(res.Raw, 10, 64); err == nil {
				return n, nil
			}
			if !strings.ContainsAny(res.Raw, ".eE") {
				return nil, record.NewError(r, fmt.Errorf("sqlite sink: version value.%s: %s is outside the 64-bit integers SQLite compares exactly", c.field.Arg, excerpt(res.Raw)))
			}
			if !jsonscan.FloatHolds(res.Raw, res.Num, 64) {
				return nil, record.NewError(r, fmt.Errorf("sqlite sink: version value.%s: %s has more digits than the REAL SQLite compares it as (%g), so versions that differ would compare equal", c.field.Arg, excerpt(res.Raw), res.Num))
			}
			return res.Num, nil
		}
		return nil, record.NewError(r, fmt.Errorf("sqlite sink: version value.%s is %s: want a number or a string", c.field.Arg, excerpt(res.Raw)))
	}
	return nil, nil
}

// excerpt bounds a value quoted in a message (record.Excerpt).
func excerpt(s string) string { return record.Excerpt(s, 64) }
