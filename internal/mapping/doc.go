package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
)

// object is a JSON object that keeps the order of its keys.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(s string) bool { return s == k })
}

// parseDoc parses one JSON document into a tree of *object, []any,
// json.Number, string, bool and nil: numbers keep their text, objects the
// order of their keys. A key written twice in one object is an error: the
// document would not say which value the mapping should keep.
func parseDoc(b []byte) (any, error) {
	if !jsonscan.ValidUnicode(b) && jsonscan.Valid(b) {
		return nil, errNotUnicode
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the value is not one JSON document")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil
	}
	switch d {
	case '{':
		o := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				return nil, &duplicateKey{k}
			}
			o.set(k, v)
		}
		_, err := dec.Token()
		return o, err
	default: // '['
		a := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
}

// errNotUnicode is a value whose strings encoding/json would decode with
// U+FFFD in place of what they hold.
var errNotUnicode = errors.New("the value has a string that is not valid Unicode (bytes that are not UTF-8, or a \\u escape of a lone UTF-16 surrogate): a mapping would write U+FFFD in its place")

// duplicateKey is a key written twice in one object of a value.
type duplicateKey struct{ key string }

func (e *duplicateKey) Error() string {
	return fmt.Sprintf("the value has the key %q twice in one object: a mapping would not know which one to keep", e.key)
}

// appendDoc appends v, a tree of parseDoc's types, as compact JSON.
func appendDoc(b []byte, v any) []byte {
	switch x := v.(type) {
	case *object:
		b = append(b, '{')
		for i, k := range x.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendDoc(b, x.vals[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDoc(b, e)
		}
		return append(b, ']')
	case json.Number:
		return append(b, x...)
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	default: // nil
		return append(b, "null"...)
	}
}

// appendString appends s as a JSON string, escaping only what JSON
// requires (no HTML escaping: <, > and & stay as they are).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// views maps the maps a view built to the order of their keys, so that an
// object an expression returns whole keeps its order.
type views map[uintptr][]string

// view returns v as an expression sees it: objects as map[string]any,
// numbers as *Dec (Src is their path), the rest as is. A number a Dec
// cannot hold (an exponent out of range) stays a json.Number, which
// arithmetic refuses.
func (vs views) view(v any, path string) any {
	switch x := v.(type) {
	case *object:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = vs.view(x.vals[k], path+"."+k)
		}
		vs[reflect.ValueOf(m).Pointer()] = x.keys
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = vs.view(e, fmt.Sprintf("%s[%d]", path, i))
		}
		return a
	case json.Number:
		d, err := ParseDec(string(x))
		if err != nil {
			return x
		}
		d.Src = path
		return d
	}
	return v
}

// fromExpr turns what an expression returned into a document tree. A
// result that a JSON document cannot hold exactly is an error: a float64
// (binary floating point), a time (format it with format_time and a zone).
func (vs views) fromExpr(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, json.Number:
		return x, nil
	case *Dec, Dec, int, int64, int32: // expr dereferences a *Dec in places (a ?? b)
		d, _, _ := num(x)
		return json.Number(d.String()), nil
	case float64, float32:
		return nil, fmt.Errorf("the expression returned the binary floating-point number %v, which is not exact: compute with the value's numbers and literals, which are decimals", x)
	case time.Time:
		return nil, errors.New("the expression returned a time: write it as text with format_time(t, layout, zone)")
	case map[string]any:
		return vs.objectOf(x)
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			d, err := vs.fromExpr(e)
			if err != nil {
				return nil, err
			}
			a[i] = d
		}
		return a, nil
	}
	return nil, fmt.Errorf("the expression returned a %T, which a JSON value cannot hold", v)
}

// objectOf turns a map an expression returned into an object: in the
// order of the value's object it is a view of, else with its keys sorted.
func (vs views) objectOf(m map[string]any) (*object, error) {
	keys := vs[reflect.ValueOf(m).Pointer()]
	if keys == nil || len(keys) != len(m) {
		keys = slices.Sorted(maps.Keys(m))
	}
	o := newObject()
	for _, k := range keys {
		e, ok := m[k]
		if !ok {
			continue
		}
		d, err := vs.fromExpr(e)
		if err != nil {
			return nil, err
		}
		o.set(k, d)
	}
	return o, nil
}
