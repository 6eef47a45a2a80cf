package sinks

import (
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// keyPart is one piece of a key template the fast path renders: literal
// text, a record field (.Key, .Topic, .Partition, .Offset) or a path into
// the JSON value (.Value.a.b).
type keyPart struct {
	text  string
	field string   // "Key", "Topic", "Partition", "Offset"; "" for text or a path
	path  []string // the object keys of .Value.<path>
}

// fastParts returns the parts of a template made only of text and actions
// that print one plain field ({{ .Value.id }}, {{ .Key }}), or nil when it
// needs text/template (pipelines, functions, .Headers, .Timestamp, .Value
// alone, variables, control structures).
func fastParts(t *template.Template) []keyPart {
	if t.Tree == nil || t.Tree.Root == nil || len(t.Templates()) != 1 {
		return nil
	}
	var parts []keyPart
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, keyPart{text: string(n.Text)})
		case *parse.ActionNode:
			p := n.Pipe
			if len(p.Decl) > 0 || p.IsAssign || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok {
				return nil
			}
			switch id := f.Ident; {
			case len(id) >= 2 && id[0] == "Value":
				parts = append(parts, keyPart{path: id[1:]})
			case len(id) == 1 && recordFields[id[0]] != nil:
				parts = append(parts, keyPart{field: id[0]})
			default:
				return nil
			}
		default:
			return nil
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return parts
}

// fastKey renders parts for r with field lookups in the JSON value instead
// of decoding it, answering only where the result is certainly what
// text/template renders on the decoded value (lookupScalar); else false.
func fastKey(parts []keyPart, r *record.Record) (string, bool) {
	var b strings.Builder
	var validJSON int8 // 1: r.Value is valid JSON, -1: it is not, 0: not checked yet
	for _, p := range parts {
		switch {
		case p.path != nil:
			if validJSON == 0 {
				validJSON = -1
				if jsonscan.Valid(r.JSONValue()) {
					validJSON = 1
				}
			}
			if validJSON < 0 {
				return "", false
			}
			s, ok := lookupScalar(r.JSONValue(), p.path)
			if !ok {
				return "", false
			}
			b.WriteString(s) // a copy: s shares the value's bytes
		case p.field == "Key":
			b.Write(r.Key)
		case p.field == "Topic":
			b.WriteString(r.Topic)
		case p.field == "Partition":
			b.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case p.field == "Offset":
			b.WriteString(strconv.FormatInt(r.Offset, 10))
		default:
			b.WriteString(p.text)
		}
	}
	return b.String(), true
}

// lookupScalar follows path through the objects of doc (valid JSON), the
// last of duplicate keys winning as in encoding/json, and returns the
// scalar it reaches as text/template prints its decoded form: a string
// without escapes in valid UTF-8, a number as written, a boolean; else
// false. The string shares doc's bytes.
func lookupScalar(doc []byte, path []string) (string, bool) {
	if len(doc) == 0 {
		return "", false
	}
	cur := gjson.Parse(unsafe.String(unsafe.SliceData(doc), len(doc)))
	for _, name := range path {
		if !cur.IsObject() {
			return "", false
		}
		if encode.SimplePath(name) && strings.IndexByte(cur.Raw, '\\') < 0 && strings.Count(cur.Raw, `"`+name+`"`) == 1 {
			// The name occurs once, unescaped: gjson's first match is the
			// member, without walking every member for duplicates.
			cur = gjson.Get(cur.Raw, name)
			if !cur.Exists() {
				return "", false
			}
			continue
		}
		var found gjson.Result
		ok, escaped := false, false
		cur.ForEach(func(k, v gjson.Result) bool {
			if strings.IndexByte(k.Raw, '\\') >= 0 {
				escaped = true // leave unescaping keys to encoding/json
				return false
			}
			if k.Str == name {
				found, ok = v, true // the last duplicate wins, as in encoding/json
			}
			return true
		})
		if !ok || escaped {
			return "", false
		}
		cur = found
	}
	switch cur.Type {
	case gjson.Number:
		return cur.Raw, true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	case gjson.String:
		raw := cur.Raw[1 : len(cur.Raw)-1]
		if strings.IndexByte(raw, '\\') >= 0 || !utf8.ValidString(raw) {
			return "", false
		}
		return raw, true
	}
	return "", false
}
