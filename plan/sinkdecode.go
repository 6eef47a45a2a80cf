package plan

import (
	"cmp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// walkSink decodes the mapping of a sink section: its common fields into s, its type's
// own fields into a new config of its type (s.Config, from the
// descriptor's NewConfig). A key that another type takes is decoded into a
// config of that type, which is dropped: the validation says it does not
// apply (naming the types that take it), and its value is still checked.
// A key no type takes is unknown.
func (d *decoder) walkSink(n *yaml.Node, s *Sink, path string) {
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
	var others []yamlField // the other types' fields, the first of each name
	for _, t := range d.sinks {
		for _, f := range t.configFields() {
			if _, dup := fieldNamed(others, f.name); !dup {
				others = append(others, f)
			}
		}
	}
	d.walkFields(n, path, s.fields(), others)
}

// walkFields decodes each key of the mapping n into the value of the
// field of own, or else of others, of its name, reporting duplicate keys
// and keys neither has (suggesting a name of own, or else of others).
func (d *decoder) walkFields(n *yaml.Node, path string, own, others []yamlField) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.problem(k, fp, "duplicate key (first set at line %d): keep one", prev.Line)
			continue
		}
		seen[k.Value] = k
		f, ok := fieldNamed(own, k.Value)
		if !ok {
			f, ok = fieldNamed(others, k.Value)
		}
		if !ok {
			d.problem(k, fp, "unknown field %q in %s%s", k.Value, cmp.Or(path, "the plan"),
				meant(cmp.Or(Suggest(k.Value, yamlNames(own)), Suggest(k.Value, yamlNames(others)))))
			continue
		}
		d.walk(val, f.value, fp)
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
	return slices.ContainsFunc(d.sinks, func(t SinkDescriptor) bool {
		f := t.Field(name)
		return f != nil && (f.Secret || f.Credentials)
	})
}
