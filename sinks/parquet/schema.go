package parquet

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// defaultColumns are an object's columns when the plan maps none: the
// record's coordinates, its timestamp, and its key, value and headers as
// they are (bytes, nullable; headers as the other sinks' JSON array).
var defaultColumns = []encode.Column{
	{Name: "topic", Field: plan.Field{Kind: plan.FieldTopic}},
	{Name: "partition", Field: plan.Field{Kind: plan.FieldPartition}},
	{Name: "offset", Field: plan.Field{Kind: plan.FieldOffset}},
	{Name: "timestamp", Field: plan.Field{Kind: plan.FieldTimestamp}},
	{Name: "timestamp_type", Field: plan.Field{Kind: plan.FieldTimestampType}},
	{Name: "kafka_key", Field: plan.Field{Kind: plan.FieldKafkaKey}},
	{Name: "value", Field: plan.Field{Kind: plan.FieldValue}},
	{Name: "headers", Field: plan.Field{Kind: plan.FieldHeaders}},
}

// kind is the Parquet type of a column.
type kind uint8

const (
	kString kind = iota
	kBytes
	kInt32
	kInt64
	kBool
	kDecimal
	kTimestampMillis
	kTimestampMicros
	kUint64
	kBase64
	kDate
	kTimeMillis
	kTimeMicros
	// kFloat and kDouble hold a decoded Avro or Protobuf float or double
	// (the shortest text that reads back as the same value): a schema's
	// column only, never one of the plan's types (a JSON number is a
	// decimal, which a float would round).
	kFloat
	kDouble
)

// colType is a column's Parquet type; precision and scale for a decimal.
type colType struct {
	kind             kind
	precision, scale int
}

var decimalRe = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// simpleTypes are the types without parameters, by name; those a plan's
// types may name are planTypes.
var simpleTypes = map[string]kind{
	"string": kString, "bytes": kBytes, "int32": kInt32, "int64": kInt64, "uint64": kUint64, "boolean": kBool,
	"timestamp_millis": kTimestampMillis, "timestamp_micros": kTimestampMicros, "base64": kBase64,
	"date": kDate, "time_millis": kTimeMillis, "time_micros": kTimeMicros, "float": kFloat, "double": kDouble,
}

// planTypes lists the types a plan's types may name, for messages.
const planTypes = "string, bytes, base64, int32, int64, uint64, boolean, decimal(P,S), date, time_millis, time_micros, timestamp_millis or timestamp_micros"

// typeAliases are the names other systems give types of planTypes, for
// a "did you mean" in messages.
var typeAliases = map[string]string{
	"timestamp": "timestamp_millis", "timestamptz": "timestamp_millis", "timestamp_nanos": "timestamp_micros", "datetime": "timestamp_millis", "time": "time_millis",
	"int": "int32", "integer": "int32", "bigint": "int64", "long": "int64", "bool": "boolean",
	"text": "string", "varchar": "string", "utf8": "string", "binary": "bytes", "blob": "bytes",
	"decimal": "decimal(P,S), e.g. 'decimal(12,2)'", "numeric": "decimal(P,S), e.g. 'decimal(12,2)'",
}

// parseType reads a type of the section's types (planTypes).
func parseType(s string) (colType, error) {
	t, err := parseAnyType(s)
	if err == nil && (t.kind == kFloat || t.kind == kDouble) {
		return colType{}, fmt.Errorf("type %q: a JSON number is a decimal, which a float would round: declare decimal(P,S), or keep it a string", s)
	}
	return t, err
}

// parseAnyType reads a type of planTypes, or float or double (the columns
// of a decoded value's schema).
func parseAnyType(s string) (colType, error) {
	if k, ok := simpleTypes[strings.TrimSpace(s)]; ok {
		return colType{kind: k}, nil
	}
	m := decimalRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil && strings.HasPrefix(strings.TrimSpace(s), "decimal(") && !strings.Contains(s, ",") {
		return colType{}, fmt.Errorf("type %q: a decimal takes a precision and a scale, decimal(P,S); in a {...} mapping quote it, 'decimal(12,2)', since a comma ends the value there", s)
	}
	if m == nil && strings.HasPrefix(strings.TrimSpace(s), "decimal(") && !strings.HasSuffix(strings.TrimSpace(s), ")") {
		return colType{}, fmt.Errorf("type %q: a decimal's precision and scale close with ')', e.g. decimal(12,2)", s)
	}
	if m == nil {
		if alias, ok := typeAliases[strings.ToLower(strings.TrimSpace(s))]; ok {
			return colType{}, fmt.Errorf("type %q: want %s (did you mean %s?)", s, planTypes, alias)
		}
		return colType{}, fmt.Errorf("type %q: want %s", s, planTypes)
	}
	p, _ := strconv.Atoi(m[1])
	sc, _ := strconv.Atoi(m[2])
	if p < 1 || p > 38 || sc > p {
		return colType{}, fmt.Errorf("type %q: want 1 <= P <= 38 and 0 <= S <= P, e.g. decimal(12,2)", s)
	}
	return colType{kind: kDecimal, precision: p, scale: sc}, nil
}

// column is one column of an object: its name, the record field it holds,
// its type and whether it may be NULL.
type column struct {
	encode.Column
	typ      colType
	optional bool
}

// fieldColumns are the type and nullability of each field kind's column
// (a value.<path> column's type may be declared).
var fieldColumns = map[plan.FieldKind]column{
	plan.FieldKey: {typ: colType{kind: kString}}, plan.FieldTopic: {typ: colType{kind: kString}},
	plan.FieldTimestampType: {typ: colType{kind: kString}}, plan.FieldHeaders: {typ: colType{kind: kString}},
	plan.FieldKafkaKey: {typ: colType{kind: kBytes}, optional: true}, plan.FieldValue: {typ: colType{kind: kBytes}, optional: true},
	plan.FieldHeader: {typ: colType{kind: kBytes}, optional: true}, plan.FieldPartition: {typ: colType{kind: kInt32}},
	plan.FieldOffset: {typ: colType{kind: kInt64}}, plan.FieldTimestamp: {typ: colType{kind: kTimestampMillis}},
	plan.FieldValuePath: {typ: colType{kind: kString}, optional: true},
}

// columns returns the typed columns of cols, value.<path> columns taking
// their type from types (string by default).
func columns(cols []encode.Column, types map[string]string) ([]column, error) {
	out := make([]column, 0, len(cols))
	for _, c := range cols {
		col, ok := fieldColumns[c.Field.Kind]
		if !ok {
			return nil, fmt.Errorf("column %s: field kind %d has no Parquet type", c.Name, c.Field.Kind)
		}
		col.Column = c
		if t, ok := types[c.Name]; ok && c.Field.Kind == plan.FieldValuePath {
			ct, err := parseType(t)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.Name, err)
			}
			col.typ = ct
		}
		out = append(out, col)
	}
	for name := range types {
		if !slices.ContainsFunc(out, func(c column) bool { return c.Name == name && c.Field.Kind == plan.FieldValuePath }) {
			return nil, fmt.Errorf("types: %s is no value.<path> column", name)
		}
	}
	return out, nil
}

// nodes are the Parquet schema nodes of the kinds without parameters.
var nodes = [...]pq.Node{
	kString: pq.String(), kBytes: pq.Leaf(pq.ByteArrayType), kInt32: pq.Int(32), kInt64: pq.Int(64),
	kBool: pq.Leaf(pq.BooleanType), kTimestampMillis: pq.Timestamp(pq.Millisecond), kTimestampMicros: pq.Timestamp(pq.Microsecond),
	kUint64: pq.Uint(64), kBase64: pq.Leaf(pq.ByteArrayType), kDate: pq.Date(), kTimeMillis: pq.TimeAdjusted(pq.Millisecond, false),
	kTimeMicros: pq.TimeAdjusted(pq.Microsecond, false), kFloat: pq.Leaf(pq.FloatType), kDouble: pq.Leaf(pq.DoubleType),
}

// node is the column's Parquet schema node.
func (c column) node() pq.Node {
	n := nodes[c.typ.kind]
	if t := c.typ; t.kind == kDecimal {
		switch {
		case t.precision <= 9:
			n = pq.Decimal(t.scale, t.precision, pq.Int32Type)
		case t.precision <= 18:
			n = pq.Decimal(t.scale, t.precision, pq.Int64Type)
		default:
			n = pq.Decimal(t.scale, t.precision, pq.FixedLenByteArrayType(16))
		}
	}
	if c.optional {
		return pq.Optional(n)
	}
	return pq.Required(n)
}

// orderedGroup is a group whose fields keep the order of the plan's
// columns (pq.Group sorts them by name).
type orderedGroup struct {
	pq.Group
	order []string
}

// Fields returns the group's fields in the columns' order.
func (g orderedGroup) Fields() []pq.Field {
	fields := slices.Clone(g.Group.Fields())
	slices.SortFunc(fields, func(a, b pq.Field) int {
		return slices.Index(g.order, a.Name()) - slices.Index(g.order, b.Name())
	})
	return fields
}

// schema is the Parquet schema of cols, in their order.
func schema(cols []column) *pq.Schema {
	g := orderedGroup{Group: pq.Group{}}
	for _, c := range cols {
		g.Group[c.Name] = c.node()
		g.order = append(g.order, c.Name)
	}
	return pq.NewSchema("replay", g)
}

// row appends the values of r's row to dst: one value per column, in
// order. A value that its column's type cannot hold exactly is a
// *record.Error.
func row(dst pq.Row, cols []column, r *record.Record) (pq.Row, error) {
	cells := encode.Cells{Record: r, Alias: true} // the writer copies the values
	for i, c := range cols {
		if c.Field.Kind == plan.FieldKey && cells.Key == "" {
			cells.Key = r.IdempotencyKey()
		}
		v, err := value(&cells, c)
		if err != nil {
			return dst, record.NewError(r, fmt.Errorf("parquet sink: column %s: %w", c.Name, err))
		}
		def := 0
		if c.optional && !v.IsNull() {
			def = 1
		}
		dst = append(dst, v.Level(0, def, i))
	}
	return dst, nil
}

// checkRow is the error row returns for r, from the only columns that can
// fail to convert (value.<path> columns not string or bytes): Write checks
// each record with it before it stages the record.
func checkRow(cols []column, r *record.Record) error {
	cells := encode.Cells{Alias: true} // nothing is kept
	for _, c := range cols {
		if c.Field.Kind != plan.FieldValuePath || c.typ.kind == kString || c.typ.kind == kBytes {
			continue
		}
		if cells.Record == nil {
			cells.Record = r
		}
		if _, err := value(&cells, c); err != nil {
			return record.NewError(r, fmt.Errorf("parquet sink: column %s: %w", c.Name, err))
		}
	}
	return nil
}

// value is the record's value of column c (a null Value for NULL).
func value(cells *encode.Cells, c column) (pq.Value, error) {
	r := cells.Record
	switch c.Field.Kind {
	case plan.FieldKafkaKey:
		return bytesValue(r.Key), nil
	case plan.FieldValue:
		return bytesValue(r.Value), nil
	case plan.FieldHeader:
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if h := r.Headers[i]; h.Key == c.Field.Arg {
				return bytesValue(h.Value), nil
			}
		}
		return pq.NullValue(), nil
	case plan.FieldPartition:
		return pq.Int32Value(r.Partition), nil
	case plan.FieldOffset:
		return pq.Int64Value(r.Offset), nil
	case plan.FieldTimestamp:
		return pq.Int64Value(r.Time.UnixMilli()), nil
	case plan.FieldTopic:
		return pq.ByteArrayValue(stringBytes(r.Topic)), nil
	case plan.FieldKey:
		return pq.ByteArrayValue(stringBytes(cells.Key)), nil
	}
	text, ok := cells.Text(c.Column)
	if !ok {
		return pq.NullValue(), nil
	}
	return typed(text, c.typ)
}

// bytesValue is b as BYTE_ARRAY, NULL for nil (empty bytes stay empty).
func bytesValue(b []byte) pq.Value {
	if b == nil {
		return pq.NullValue()
	}
	if len(b) == 0 {
		return pq.ByteArrayValue([]byte{})
	}
	return pq.ByteArrayValue(b)
}

// typed converts text, a value.<path>'s text (Cells.Text), to t, exactly:
// a value that t cannot hold without rounding or overflow is an error.
func typed(text string, t colType) (pq.Value, error) {
	switch t.kind {
	case kString, kBytes:
		return pq.ByteArrayValue(stringBytes(text)), nil
	case kInt32, kInt64:
		bits := 64
		if t.kind == kInt32 {
			bits = 32
		}
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return pq.Value{}, fmt.Errorf("%q is not an int%d", text, bits)
		}
		if bits == 32 {
			return pq.Int32Value(int32(n)), nil
		}
		return pq.Int64Value(n), nil
	case kBool:
		switch text {
		case "true":
			return pq.BooleanValue(true), nil
		case "false":
			return pq.BooleanValue(false), nil
		}
		return pq.Value{}, fmt.Errorf("%q is not a boolean (true or false)", text)
	case kTimestampMillis, kTimestampMicros:
		return timestampValue(text, t.kind)
	case kUint64:
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return pq.Value{}, fmt.Errorf("%q is not a uint64", text)
		}
		return pq.Int64Value(int64(n)), nil
	case kBase64:
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return pq.Value{}, fmt.Errorf("%q is not standard base64", text)
		}
		return pq.ByteArrayValue(b), nil
	case kDate:
		d, err := time.Parse(time.DateOnly, text)
		if err != nil {
			return pq.Value{}, fmt.Errorf("%q is not a date (YYYY-MM-DD)", text)
		}
		return pq.Int32Value(int32(d.Unix() / 86400)), nil
	case kTimeMillis, kTimeMicros:
		return timeOfDay(text, t.kind)
	case kFloat, kDouble:
		bits := 64
		if t.kind == kFloat {
			bits = 32
		}
		f, err := strconv.ParseFloat(text, bits)
		if err != nil {
			return pq.Value{}, fmt.Errorf("%q is not a float%d", text, bits)
		}
		if bits == 32 {
			return pq.FloatValue(float32(f)), nil
		}
		return pq.DoubleValue(f), nil
	}
	return decimalValue(text, t)
}

// minTime and maxTime bound the instants a timestamp column takes: the
// years RFC 3339 writes.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// integerText returns text as an int64 when it is one: an optional '-'
// and decimal digits only, in range.
func integerText(text string) (int64, bool) {
	digits := strings.TrimPrefix(text, "-")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// timestampValue converts text to a TIMESTAMP(MILLIS) or (MICROS) value
// (k): an RFC 3339 time with a zone, whose fraction must not be finer
// than the unit, or an integer, which is the unit since the Unix epoch.
func timestampValue(text string, k kind) (pq.Value, error) {
	unit, name, fix := time.Millisecond, "milliseconds", "declare timestamp_micros"
	if k == kTimestampMicros {
		unit, name, fix = time.Microsecond, "microseconds", "microseconds are the finest timestamp this sink writes: declare the column string to keep the text"
	}
	// An integer, tried only on digits: a failed ParseInt allocates its
	// error, and most timestamps are RFC 3339 text.
	if n, ok := integerText(text); ok {
		// An instant outside the years 0001-9999 (which RFC 3339 writes,
		// and readers show) is a finer unit than the column's.
		lo, hi := minTime.UnixMilli(), maxTime.UnixMilli()
		if unit == time.Microsecond {
			lo, hi = minTime.UnixMicro(), maxTime.UnixMicro()
		}
		if n < lo || n > hi {
			return pq.Value{}, fmt.Errorf("%d %s since the Unix epoch is outside the years 0001-9999: a finer unit than the column's (nanoseconds?); declare int64 to keep the number", n, name)
		}
		return pq.Int64Value(n), nil
	}
	ts, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return pq.Value{}, fmt.Errorf("%q is neither an RFC 3339 time with a zone nor an integer of %s since the Unix epoch", text, name)
	}
	if ts.Nanosecond()%int(unit) != 0 {
		return pq.Value{}, fmt.Errorf("%q has more precision than the column's %v (it would be rounded): %s", text, unit, fix)
	}
	if unit == time.Millisecond {
		return pq.Int64Value(ts.UnixMilli()), nil
	}
	return pq.Int64Value(ts.UnixMicro()), nil
}

// timeOfDay converts text, a time of day (HH:MM:SS with an optional
// fraction), to a TIME(MILLIS) (int32) or TIME(MICROS) (int64) value; a
// finer fraction than the unit is an error.
func timeOfDay(text string, k kind) (pq.Value, error) {
	tm, err := time.Parse(time.TimeOnly, text)
	if err != nil {
		return pq.Value{}, fmt.Errorf("%q is not a time of day (HH:MM:SS.fff)", text)
	}
	since := tm.Sub(time.Date(tm.Year(), tm.Month(), tm.Day(), 0, 0, 0, 0, time.UTC))
	unit := time.Millisecond
	if k == kTimeMicros {
		unit = time.Microsecond
	}
	if since%unit != 0 {
		return pq.Value{}, fmt.Errorf("%q has more precision than the column's %v (it would be rounded)", text, unit)
	}
	if k == kTimeMillis {
		return pq.Int32Value(int32(since / unit)), nil
	}
	return pq.Int64Value(int64(since / unit)), nil
}

// decimalValue is text, a decimal number (JSON's form: 12.30, -1e3), as
// the unscaled integer of a DECIMAL(P,S): an error when it has digits
// past the scale that are not zero, or more than P digits.
func decimalValue(text string, t colType) (pq.Value, error) {
	if t.precision <= 18 {
		if n, ok := plainDecimal(text, t); ok {
			if t.precision <= 9 {
				return pq.Int32Value(int32(n)), nil
			}
			return pq.Int64Value(n), nil
		}
	}
	var rat big.Rat
	if _, ok := rat.SetString(text); !ok || strings.ContainsAny(text, "/xXpP") {
		return pq.Value{}, fmt.Errorf("%q is not a decimal number", text)
	}
	scaled := new(big.Rat).Mul(&rat, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.scale)), nil)))
	if !scaled.IsInt() {
		return pq.Value{}, fmt.Errorf("%s has more than %d fraction digits (decimal(%d,%d) would round it)", text, t.scale, t.precision, t.scale)
	}
	n := scaled.Num()
	if len(new(big.Int).Abs(n).String()) > t.precision {
		return pq.Value{}, fmt.Errorf("%s has more than %d digits (decimal(%d,%d) cannot hold it)", text, t.precision, t.precision, t.scale)
	}
	switch {
	case t.precision <= 9:
		return pq.Int32Value(int32(n.Int64())), nil
	case t.precision <= 18:
		return pq.Int64Value(n.Int64()), nil
	}
	return pq.FixedLenByteArrayValue(twosComplement16(n)), nil
}

// plainDecimal is text's unscaled integer at t's scale when text is a
// plain decimal ([-]digits[.digits], no exponent) that fits t exactly;
// false sends every other text to the exact, slower path.
func plainDecimal(text string, t colType) (int64, bool) {
	s, neg := text, false
	if strings.HasPrefix(s, "-") {
		s, neg = s[1:], true
	}
	intPart, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" || len(frac) > t.scale {
		return 0, false
	}
	var n int64
	digits := 0
	for _, part := range []string{intPart, frac + strings.Repeat("0", t.scale-len(frac))} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if n == 0 && c == '0' {
				continue
			}
			digits++
			n = n*10 + int64(c-'0')
		}
	}
	if digits > t.precision {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// twosComplement16 is n as 16 bytes of big-endian two's complement (n
// fits: at most 38 decimal digits).
func twosComplement16(n *big.Int) []byte {
	b := make([]byte, 16)
	if n.Sign() >= 0 {
		n.FillBytes(b)
		return b
	}
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 128), n) // 2^128 + n
	m.FillBytes(b)
	return b
}

// keyed reports whether a column holds the idempotency key (the records'
// keys are then rendered for the sink).
func keyed(cols []column) sinks.KeyUse {
	if slices.ContainsFunc(cols, func(c column) bool { return c.Field.Kind == plan.FieldKey }) {
		return sinks.KeysAll
	}
	return sinks.KeysUnused
}

// stringBytes is s's bytes without a copy: a value the writer copies into
// its column buffer and never changes (pq.ByteArrayValue's argument only).
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
