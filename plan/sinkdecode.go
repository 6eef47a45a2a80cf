package plan

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// sinkType is the type of a sink section, which the decoder decodes
// against its type's descriptor.
var sinkType = reflect.TypeFor[Sink]()

// walkSink decodes a sink section: its common fields into s, its type's
// own fields into a new config of its type (s.Config, from the
// descriptor's NewConfig). A key that another type takes is decoded into a
// config of that type, which is dropped: the validation says it does not
// apply (naming the types that take it), and its value is still checked.
// A key no type takes is unknown.
func (d *decoder) walkSink(n *yaml.Node, s *Sink, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "want a mapping (key: value lines), got %s", d.describe(n, path))
		return
	}
	// The type first: it says what the rest of the section holds.
	for i := 0; i+1 < len(n.Content); i += 2 {
		var t SinkType
		if n.Content[i].Value == "type" && n.Content[i+1].Decode(&t) == nil {
			if desc, ok := d.sinks.Lookup(t); ok && desc.NewConfig != nil {
				s.Config = desc.NewConfig()
			}
			break
		}
	}
	own := s.fields()
	others := map[string]reflect.Value{}
	var otherNames []string
	for _, t := range d.sinks {
		if t.NewConfig == nil {
			continue
		}
		for _, f := range yamlFields(reflect.ValueOf(t.NewConfig()).Elem()) {
			if _, dup := others[f.name]; !dup {
				others[f.name] = f.value
				otherNames = append(otherNames, f.name)
			}
		}
	}
	target := func(name string) (reflect.Value, bool) {
		for _, f := range own {
			if f.name == name {
				return f.value, true
			}
		}
		v, ok := others[name]
		return v, ok
	}
	hint := func(name string) string {
		names := make([]string, len(own))
		for i, f := range own {
			names[i] = f.name
		}
		if h := suggest(name, names); h != "" {
			return h
		}
		return suggest(name, otherNames)
	}
	d.walkFields(n, path, target, hint)
}

// walkFields decodes each key of the mapping n into the value target
// returns for it, reporting duplicate keys and keys target has no value
// for (with hint's suggestion).
func (d *decoder) walkFields(n *yaml.Node, path string, target func(name string) (reflect.Value, bool), hint func(name string) string) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.problem(k, fp, "duplicate key (first set at line %d): keep one", prev.Line)
			continue
		}
		seen[k.Value] = k
		f, ok := target(k.Value)
		if !ok {
			msg := fmt.Sprintf("unknown field %q in %s", k.Value, structName(path))
			if s := hint(k.Value); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.problem(k, fp, "%s", msg)
			continue
		}
		d.walk(val, f, fp)
	}
}

// secret reports whether the setting at path holds credentials, or
// contains some.
func (d *decoder) secret(path string) bool {
	if secretPath.MatchString(path) {
		return true
	}
	section, rest, _ := strings.Cut(path, ".")
	if section != "sink" && section != "dead_letter" {
		return false
	}
	name := rest
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		name = rest[:i]
	}
	for _, t := range d.sinks {
		if f := t.Field(name); f != nil && (f.Secret || f.Credentials) {
			return true
		}
	}
	return false
}
