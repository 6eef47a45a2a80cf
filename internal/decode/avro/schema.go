// Package avro decodes Avro binary payloads to JSON by their writer's
// schema, exactly: decimals keep their scale, longs stay integers, logical
// types render as docs/decoding.md lays out. It parses the schema JSON
// itself, keeping what the rendering needs (logical types, enum symbols as
// the writer defines them, named types across referenced schemas).
package avro

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/replay-tool/replay/internal/decode/jsonw"
)

// Kind is an Avro type.
type Kind uint8

// The Avro types.
const (
	Null Kind = iota
	Boolean
	Int
	Long
	Float
	Double
	Bytes
	String
	Record
	Enum
	Array
	Map
	Union
	Fixed
)

var kindNames = [...]string{"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "array", "map", "union", "fixed"}

// String returns the Avro name of k ("long", "record").
func (k Kind) String() string { return kindNames[k] }

// Logical is an Avro logical type the rendering knows; None when the
// schema names none, names one this package does not know, or names one
// the Avro specification calls invalid where it stands (a decimal whose
// scale exceeds its precision): the value renders as its underlying type.
type Logical uint8

// The logical types rendered.
const (
	None Logical = iota
	Decimal
	UUID
	Date
	TimeMillis
	TimeMicros
	TimestampMillis
	TimestampMicros
	TimestampNanos
	LocalTimestampMillis
	LocalTimestampMicros
	LocalTimestampNanos
)

// Schema is one parsed Avro type. Named types (record, enum, fixed) are
// shared by every reference to them, so a recursive schema is a cyclic
// graph.
type Schema struct {
	Kind    Kind
	Logical Logical
	// Precision and Scale of a decimal.
	Precision, Scale int
	// Name is the full name of a record, enum or fixed.
	Name string
	// Fields of a record, in the writer's order.
	Fields []Field
	// Symbols of an enum, as the writer's schema defines them.
	Symbols []string
	// symbols are Symbols rendered as JSON strings.
	symbols [][]byte
	// Items is an array's item type or a map's value type.
	Items *Schema
	// Branches of a union.
	Branches []*Schema
	// Size of a fixed, in bytes.
	Size int

	// itemMin is the fewest bytes an array's item encodes to: it bounds a
	// block's item count by the bytes left.
	itemMin int
}

// Field is one field of a record.
type Field struct {
	Name string
	Type *Schema
	// key is Name rendered as a JSON object key, with its colon, after
	// the '{' or ',' that comes before it in the record's JSON.
	key []byte
}

// Names holds the named types already parsed, by full name: those of a
// schema's references, which the schema may use by name.
type Names map[string]*Schema

// Parse parses the Avro schema text (JSON). names holds the named types of
// the schema's references, parsed before it, and receives the schema's
// own; nil for a schema without references. Warnings name the unions whose
// branches render alike as bare JSON (int and long, string and enum, ...).
func Parse(text string, names Names) (*Schema, []string, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var node any
	if err := dec.Decode(&node); err != nil {
		return nil, nil, fmt.Errorf("avro schema is not JSON: %w", err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("avro schema has text after its JSON")
	}
	if names == nil {
		names = Names{}
	}
	p := &parser{names: names}
	s, err := p.parse(node, "")
	if err != nil {
		return nil, nil, fmt.Errorf("avro schema: %w", err)
	}
	w := &warner{seen: map[*Schema]bool{}}
	w.walk(s, "value")
	return s, w.out, nil
}

type parser struct {
	names Names
}

var primitives = map[string]Kind{"null": Null, "boolean": Boolean, "int": Int, "long": Long, "float": Float, "double": Double, "bytes": Bytes, "string": String}

func (p *parser) parse(node any, ns string) (*Schema, error) {
	switch n := node.(type) {
	case string:
		if k, ok := primitives[n]; ok {
			return &Schema{Kind: k}, nil
		}
		return p.lookup(n, ns)
	case []any:
		return p.union(n, ns)
	case map[string]any:
		return p.complex(n, ns)
	}
	return nil, fmt.Errorf("a type is a name, a list (union) or an object, not %s", jsonKind(node))
}

func (p *parser) lookup(name, ns string) (*Schema, error) {
	if !strings.Contains(name, ".") && ns != "" {
		if s, ok := p.names[ns+"."+name]; ok {
			return s, nil
		}
	}
	if s, ok := p.names[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("unknown type %q (neither a primitive type nor a named type defined before it or in a referenced schema)", name)
}

func (p *parser) union(n []any, ns string) (*Schema, error) {
	s := &Schema{Kind: Union}
	for i, b := range n {
		bs, err := p.parse(b, ns)
		if err != nil {
			return nil, fmt.Errorf("union branch %d: %w", i, err)
		}
		if bs.Kind == Union {
			return nil, fmt.Errorf("union branch %d is a union (unions may not nest)", i)
		}
		s.Branches = append(s.Branches, bs)
	}
	if len(s.Branches) == 0 {
		return nil, fmt.Errorf("a union needs at least one branch")
	}
	return s, nil
}

func (p *parser) complex(n map[string]any, ns string) (*Schema, error) {
	t, ok := n["type"]
	if !ok {
		return nil, fmt.Errorf("an object type needs a \"type\"")
	}
	name, isName := t.(string)
	if !isName {
		// {"type": {...}} or {"type": [...]}: the nested type itself
		return p.parse(t, ns)
	}
	var s *Schema
	var err error
	switch name {
	case "record", "error":
		s, err = p.record(n, ns)
	case "enum":
		s, err = p.enum(n, ns)
	case "fixed":
		s, err = p.fixed(n, ns)
	case "array", "map":
		s, err = p.container(n, name, ns)
	default:
		k, prim := primitives[name]
		if !prim {
			return p.lookup(name, ns)
		}
		s = &Schema{Kind: k}
	}
	if err != nil {
		return nil, err
	}
	if lt, ok := n["logicalType"].(string); ok {
		setLogical(s, lt, n)
	}
	return s, nil
}

// define registers the named type s under its full name, from n's name and
// namespace; it returns the namespace s's own names resolve in.
func (p *parser) define(s *Schema, n map[string]any, ns string) (string, error) {
	name, _ := n["name"].(string)
	if name == "" {
		return "", fmt.Errorf("a %s needs a name", s.Kind)
	}
	if explicit, ok := n["namespace"].(string); ok && !strings.Contains(name, ".") {
		ns = explicit
	}
	full := name
	if !strings.Contains(name, ".") && ns != "" {
		full = ns + "." + name
	}
	if _, dup := p.names[full]; dup {
		return "", fmt.Errorf("type %q is defined twice", full)
	}
	s.Name = full
	p.names[full] = s
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i], nil
	}
	return "", nil
}

func (p *parser) record(n map[string]any, ns string) (*Schema, error) {
	s := &Schema{Kind: Record}
	inner, err := p.define(s, n, ns)
	if err != nil {
		return nil, err
	}
	fields, ok := n["fields"].([]any)
	if !ok {
		return nil, fmt.Errorf("record %s needs a list of fields", s.Name)
	}
	for i, f := range fields {
		fo, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("record %s: field %d is not an object", s.Name, i)
		}
		fname, _ := fo["name"].(string)
		if fname == "" {
			return nil, fmt.Errorf("record %s: field %d has no name", s.Name, i)
		}
		ft, err := p.parse(fo["type"], inner)
		if err != nil {
			return nil, fmt.Errorf("record %s, field %s: %w", s.Name, fname, err)
		}
		before := byte(',')
		if len(s.Fields) == 0 {
			before = '{'
		}
		s.Fields = append(s.Fields, Field{Name: fname, Type: ft, key: append(jsonw.String([]byte{before}, fname), ':')})
	}
	return s, nil
}

func (p *parser) enum(n map[string]any, ns string) (*Schema, error) {
	s := &Schema{Kind: Enum}
	if _, err := p.define(s, n, ns); err != nil {
		return nil, err
	}
	syms, ok := n["symbols"].([]any)
	if !ok || len(syms) == 0 {
		return nil, fmt.Errorf("enum %s needs a list of symbols", s.Name)
	}
	for _, sym := range syms {
		str, ok := sym.(string)
		if !ok {
			return nil, fmt.Errorf("enum %s: a symbol is not a string", s.Name)
		}
		s.Symbols = append(s.Symbols, str)
		s.symbols = append(s.symbols, jsonw.String(nil, str))
	}
	return s, nil
}

func (p *parser) fixed(n map[string]any, ns string) (*Schema, error) {
	s := &Schema{Kind: Fixed}
	if _, err := p.define(s, n, ns); err != nil {
		return nil, err
	}
	size, ok := intAttr(n, "size")
	if !ok || size < 0 || size > math.MaxInt32 {
		return nil, fmt.Errorf("fixed %s needs a size, a whole number of bytes", s.Name)
	}
	s.Size = size
	return s, nil
}

func (p *parser) container(n map[string]any, kind, ns string) (*Schema, error) {
	s := &Schema{Kind: Array}
	attr := "items"
	if kind == "map" {
		s.Kind, attr = Map, "values"
	}
	it, ok := n[attr]
	if !ok {
		return nil, fmt.Errorf("%s needs %q", kind, attr)
	}
	items, err := p.parse(it, ns)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, attr, err)
	}
	s.Items = items
	if s.Kind == Array {
		s.itemMin = minBytes(items, map[*Schema]bool{})
	}
	return s, nil
}

// setLogical sets s's logical type lt when the Avro specification calls it
// valid on s; else s stays its underlying type.
func setLogical(s *Schema, lt string, n map[string]any) {
	switch {
	case lt == "decimal" && (s.Kind == Bytes || s.Kind == Fixed):
		prec, ok1 := intAttr(n, "precision")
		scale, ok2 := 0, true
		if _, has := n["scale"]; has {
			scale, ok2 = intAttr(n, "scale")
		}
		if !ok1 || !ok2 || prec <= 0 || scale < 0 || scale > prec {
			return
		}
		if s.Kind == Fixed && float64(prec) > math.Floor(math.Log10(2)*float64(8*s.Size-1)) {
			return
		}
		s.Logical, s.Precision, s.Scale = Decimal, prec, scale
	case lt == "uuid" && (s.Kind == String || s.Kind == Fixed && s.Size == 16):
		s.Logical = UUID
	case lt == "date" && s.Kind == Int:
		s.Logical = Date
	case lt == "time-millis" && s.Kind == Int:
		s.Logical = TimeMillis
	case s.Kind == Long:
		s.Logical = longLogical[lt]
	}
}

var longLogical = map[string]Logical{
	"time-micros": TimeMicros, "timestamp-millis": TimestampMillis, "timestamp-micros": TimestampMicros, "timestamp-nanos": TimestampNanos,
	"local-timestamp-millis": LocalTimestampMillis, "local-timestamp-micros": LocalTimestampMicros, "local-timestamp-nanos": LocalTimestampNanos,
}

// intAttr reads n[key] as a whole JSON number.
func intAttr(n map[string]any, key string) (int, bool) {
	num, ok := n[key].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := num.Int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// warner collects the unions whose branches render alike as bare JSON.
type warner struct {
	seen map[*Schema]bool
	out  []string
}

func (w *warner) walk(s *Schema, path string) {
	if s.Name != "" {
		if w.seen[s] {
			return
		}
		w.seen[s] = true
	}
	switch s.Kind {
	case Record:
		for _, f := range s.Fields {
			w.walk(f.Type, path+"."+f.Name)
		}
	case Array, Map:
		w.walk(s.Items, path+"[]")
	case Union:
		byShape := map[string]string{}
		for _, b := range s.Branches {
			shape := jsonShape(b)
			if prev, ok := byShape[shape]; ok {
				w.out = append(w.out, fmt.Sprintf("union at %s: branches %s and %s both render as a JSON %s, so with avro.unions: bare the value does not say which branch it is (avro.unions: tagged names the branch)", path, prev, BranchName(b), shape))
				continue
			}
			byShape[shape] = BranchName(b)
		}
		for _, b := range s.Branches {
			w.walk(b, path)
		}
	}
}

// jsonShape is the kind of JSON value s renders as, bare.
func jsonShape(s *Schema) string {
	switch s.Kind {
	case Null:
		return "null"
	case Boolean:
		return "boolean"
	case Int, Long, Float, Double:
		if s.Logical != None {
			return "string"
		}
		return "number"
	case Bytes, Fixed:
		if s.Logical == Decimal {
			return "number"
		}
		return "string"
	case String, Enum:
		return "string"
	case Record, Map:
		return "object"
	}
	return "array"
}

// BranchName is the name of a union branch of type s in Avro's JSON
// encoding: a named type's full name, else its type's name ("long",
// "array").
func BranchName(s *Schema) string {
	if s.Name != "" {
		return s.Name
	}
	return s.Kind.String()
}

// minBytes is the fewest bytes a value of s encodes to; a record met again
// inside itself counts 0.
func minBytes(s *Schema, visiting map[*Schema]bool) int {
	switch s.Kind {
	case Null:
		return 0
	case Fixed:
		return s.Size
	case Record:
		if visiting[s] {
			return 0
		}
		visiting[s] = true
		n := 0
		for _, f := range s.Fields {
			n += minBytes(f.Type, visiting)
		}
		delete(visiting, s)
		return n
	}
	return 1
}
