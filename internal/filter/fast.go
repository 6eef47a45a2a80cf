package filter

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
)

// valueFields returns the top-level fields of the value that src reads,
// when it reads the value only through them (value.status, value.a.b,
// value["id"]); nil when it uses the value in any other way (value alone,
// value[k], $env, a variable named value), which needs the whole value.
func valueFields(src string) []string {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	v := &fieldsVisitor{covered: map[ast.Node]bool{}}
	ast.Walk(&tree.Node, v)
	if v.other || v.uses == 0 || v.uses != len(v.covered) {
		return nil
	}
	return v.fields
}

type fieldsVisitor struct {
	fields  []string
	covered map[ast.Node]bool // value identifiers read through a constant field
	uses    int               // value identifiers
	other   bool              // something that defeats the analysis
}

func (v *fieldsVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		switch n.Value {
		case "value":
			v.uses++
		case "$env":
			v.other = true
		}
	case *ast.VariableDeclaratorNode:
		if n.Name == "value" {
			v.other = true
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		if !ok || id.Value != "value" {
			return
		}
		prop, ok := n.Property.(*ast.StringNode)
		if !ok {
			return
		}
		if v.covered[id] = true; !slices.Contains(v.fields, prop.Value) {
			v.fields = append(v.fields, prop.Value)
		}
	}
}

// partialValue returns the value as ParseValue would decode it, but with
// only the given top-level fields (each decoded in full, the last of
// duplicate keys winning as in encoding/json, a missing one absent): an
// expression that reads only those fields sees exactly what it would see
// of the whole value. It returns false when the value is not a JSON object
// or has an escaped key; the caller then decodes the whole value.
func partialValue(v []byte, fields []string) (map[string]any, bool) {
	if !jsonscan.ValidUnicode(v) {
		return nil, false
	}
	doc := gjson.ParseBytes(v)
	if !doc.IsObject() {
		return nil, false
	}
	raw := make(map[string]string, len(fields))
	ok := true
	doc.ForEach(func(k, val gjson.Result) bool {
		if strings.IndexByte(k.Raw, '\\') >= 0 {
			ok = false // leave unescaping keys to encoding/json
			return false
		}
		for _, f := range fields {
			if k.Str == f {
				raw[f] = val.Raw // the last duplicate wins
			}
		}
		return true
	})
	if !ok {
		return nil, false
	}
	out := make(map[string]any, len(raw))
	for f, r := range raw {
		out[f] = decodeRaw(r)
	}
	return out, true
}

// decodeRaw decodes one JSON value (valid, from a valid document) as
// ParseValue does: numbers as json.Number.
func decodeRaw(raw string) any {
	switch raw[0] {
	case 'n':
		return nil
	case 't':
		return true
	case 'f':
		return false
	case '"':
		if s := raw[1 : len(raw)-1]; strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) {
			return s
		}
	case '{', '[':
	default:
		return json.Number(raw)
	}
	return record.ParseValue([]byte(raw))
}
