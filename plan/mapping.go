package plan

import (
	"fmt"
	"slices"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"

	"github.com/replay-tool/replay/internal/mapping"
)

// Mapping is the plan's mapping: ordered steps over the decoded value,
// run after the filter and before the key template, columns and the sink
// (see internal/mapping). It decodes itself to keep the order of its steps
// and of a step's entries as the file writes them.
type Mapping []MappingStep

// Step kinds, the one key of a mapping step.
const (
	MappingSet    = "set"
	MappingRename = "rename"
	MappingDrop   = "drop"
)

// MappingStep is one step: set (path: expression), rename (path: path) or
// drop (a list of paths).
type MappingStep struct {
	Kind    string
	Entries []MappingEntry
	pos     Pos
}

// MappingEntry is one entry of a step: Path (set: the field written;
// rename, drop: the field read) and Arg (set: the expression; rename: the
// new path; drop: "").
type MappingEntry struct {
	Path, Arg       string
	pathPos, argPos Pos
}

// UnmarshalYAML reads a list of steps, each a mapping of exactly one of
// set, rename or drop.
func (m *Mapping) UnmarshalYAML(n *yaml.Node) error {
	const example = "e.g.\n  mapping:\n    - set: {amount_eur: 'value.amount * 0.92'}\n    - rename: {value.cust: customer}\n    - drop: [value.debug]"
	if n.Kind != yaml.SequenceNode {
		return errorAt(n, "want a list of steps (set, rename or drop), got %s; %s", describe(n), example)
	}
	out := Mapping{}
	for i, s := range n.Content {
		if s.Kind != yaml.MappingNode || len(s.Content) != 2 {
			got := describe(s)
			if s.Kind == yaml.MappingNode {
				keys := []string{}
				for j := 0; j < len(s.Content); j += 2 {
					keys = append(keys, s.Content[j].Value)
				}
				got = "a step with " + strings.Join(keys, ", ")
			}
			return errorAt(s, "step %d: a step is exactly one of set, rename or drop, got %s: write one step per list item", i+1, got)
		}
		k, v := s.Content[0], s.Content[1]
		step := MappingStep{Kind: k.Value, pos: Pos{k.Line, k.Column}}
		var err error
		switch k.Value {
		case MappingSet, MappingRename:
			step.Entries, err = mappingPairs(i+1, k.Value, v)
		case MappingDrop:
			step.Entries, err = mappingList(i+1, v)
		default:
			hint := ""
			if sug := Suggest(k.Value, []string{MappingSet, MappingRename, MappingDrop}); sug != "" {
				hint = fmt.Sprintf(" (did you mean %s?)", sug)
			}
			err = errorAt(k, "step %d: unknown step %q%s: a step is set, rename or drop", i+1, k.Value, hint)
		}
		if err != nil {
			return err
		}
		out = append(out, step)
	}
	*m = out
	return nil
}

// mappingPairs reads a set or rename step's mapping of path to expression
// or path, in the file's order.
func mappingPairs(step int, kind string, n *yaml.Node) ([]MappingEntry, error) {
	what := "a mapping of field path to expression, e.g. {amount_eur: 'value.amount * 0.92'}"
	if kind == MappingRename {
		what = "a mapping of field path to new path, e.g. {value.cust: customer}"
	}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, errorAt(n, "step %d: %s wants %s, got %s", step, kind, what, describe(n))
	}
	var out []MappingEntry
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, errorAt(v, "step %d: %s wants %s", step, kind, what)
		}
		if line, dup := seen[k.Value]; dup {
			return nil, errorAt(k, "step %d: %s lists %s twice (first at line %d): keep one", step, kind, k.Value, line)
		}
		seen[k.Value] = k.Line
		out = append(out, MappingEntry{Path: k.Value, Arg: v.Value, pathPos: Pos{k.Line, k.Column}, argPos: Pos{v.Line, v.Column}})
	}
	return out, nil
}

// mappingList reads a drop step's list of paths.
func mappingList(step int, n *yaml.Node) ([]MappingEntry, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return nil, errorAt(n, "step %d: drop wants a list of field paths, got %s: write it as a list, e.g. [%s]", step, describe(n), n.Value)
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, errorAt(n, "step %d: drop wants a list of field paths, e.g. [value.debug], got %s", step, describe(n))
	}
	var out []MappingEntry
	for _, p := range n.Content {
		if p.Kind != yaml.ScalarNode {
			return nil, errorAt(p, "step %d: drop wants a list of field paths, e.g. [value.debug], got %s in it", step, describe(p))
		}
		out = append(out, MappingEntry{Path: p.Value, pathPos: Pos{p.Line, p.Column}})
	}
	return out, nil
}

// String is the mapping as one line, for the fingerprint: each step's
// kind and entries in order, paths in their full form (customer and
// value.customer are one field, so one fingerprint).
func (m Mapping) String() string {
	var b strings.Builder
	for _, s := range m {
		fmt.Fprintf(&b, "%s{", s.Kind)
		for i, e := range s.Entries {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", fullPath(e.Path))
			switch s.Kind {
			case MappingSet:
				fmt.Fprintf(&b, ":%q", e.Arg)
			case MappingRename:
				fmt.Fprintf(&b, ":%q", fullPath(e.Arg))
			}
		}
		b.WriteString("}")
	}
	return b.String()
}

// fullPath is a path as value.<keys>; s as written when it is no path.
func fullPath(s string) string {
	if p, err := mapping.ParsePath(s); err == nil {
		return p.String()
	}
	return s
}

// Compile returns the mapping's steps, compiled (see internal/mapping).
// nil for a plan without a mapping. An error names the step and entry that
// does not compile: validation reports them at their position.
func (m Mapping) Compile() (*mapping.Mapping, error) {
	if len(m) == 0 {
		return nil, nil
	}
	steps := make([]mapping.Step, 0, len(m))
	for i, s := range m {
		st, problems := s.compile()
		if len(problems) > 0 {
			return nil, fmt.Errorf("step %d: %s", i+1, problems[0].msg)
		}
		steps = append(steps, st)
	}
	return mapping.New(steps), nil
}

// mappingProblem is a problem of one entry, at its position.
type mappingProblem struct {
	pos Pos
	msg string
}

// compile compiles one step, returning what is wrong with each entry.
func (s MappingStep) compile() (mapping.Step, []mappingProblem) {
	var problems []mappingProblem
	st := mapping.Step{Kind: map[string]mapping.Kind{MappingSet: mapping.Set, MappingRename: mapping.Rename, MappingDrop: mapping.Drop}[s.Kind]}
	for _, e := range s.Entries {
		path, err := mapping.ParsePath(e.Path)
		if err != nil {
			problems = append(problems, mappingProblem{e.pathPos, fmt.Sprintf("%s: %v", s.Kind, err)})
			continue
		}
		op := mapping.Op{From: path}
		switch s.Kind {
		case MappingSet:
			op = mapping.Op{To: path}
			if op.Expr, err = mapping.CompileExpr(e.Arg); err != nil {
				problems = append(problems, mappingProblem{e.argPos, fmt.Sprintf("set %s: bad expression at %v", path, err)})
				continue
			}
		case MappingRename:
			if op.To, err = mapping.ParsePath(e.Arg); err != nil {
				problems = append(problems, mappingProblem{e.argPos, fmt.Sprintf("rename %s: %v", path, err)})
				continue
			}
			if slices.Equal(op.From, op.To) {
				problems = append(problems, mappingProblem{e.argPos, fmt.Sprintf("rename %s: renames the field to itself (%s and %s are the same field)", path, e.Path, e.Arg)})
				continue
			}
		}
		st.Ops = append(st.Ops, op)
	}
	return st, problems
}

// mapping checks the plan's mapping: its paths and expressions, and that
// no step drops or renames away a field the sink's key template or
// columns still read (cols, the columns its section declared).
func (v *validator) mapping(cols []Column) {
	p := v.p
	if len(p.Mapping) == 0 {
		return
	}
	var removed []removal
	for i, s := range p.Mapping {
		st, problems := s.compile()
		for _, pr := range problems {
			v.at(pr.pos, "mapping", "step %d: %s", i+1, pr.msg)
		}
		for j, op := range st.Ops {
			switch st.Kind {
			case mapping.Set:
				removed = restore(removed, op.To)
			case mapping.Rename:
				removed = append(restore(removed, op.To), removal{op.From, "renames", s.Entries[j].pathPos, i + 1})
			case mapping.Drop:
				removed = append(removed, removal{op.From, "drops", s.Entries[j].pathPos, i + 1})
			}
		}
	}
	for _, r := range removed {
		for _, use := range v.valueReads(cols) {
			if under(use.path, r.path) {
				v.at(r.pos, "mapping", "step %d %s %s, which %s still reads: the sink sees the mapped value; read the new field there, or keep this one", r.step, r.verb, r.path, use.by)
				break
			}
		}
	}
}

// removal is a field a step drops or renames away.
type removal struct {
	path mapping.Path
	verb string
	pos  Pos
	step int
}

// restore forgets the removals of fields at or under a path a later step
// writes.
func restore(removed []removal, written mapping.Path) []removal {
	return slices.DeleteFunc(removed, func(r removal) bool { return under(r.path, written) })
}

// under reports whether path is at or under prefix.
func under(path, prefix mapping.Path) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// valueRead is a field of the value the sink reads, and who reads it.
type valueRead struct {
	path mapping.Path
	by   string
}

// valueReads returns the fields of the value the sink's key template
// ({{ .Value.id }}) and columns (value.<path>) read. A gjson path is cut
// at its first key with a wildcard, a query or an escape.
func (v *validator) valueReads(cols []Column) []valueRead {
	var out []valueRead
	if k := v.p.Sink.Key; k != "" {
		if t, err := template.New("key").Parse(k); err == nil {
			for _, ident := range templateFields(t.Tree.Root) {
				if len(ident) > 1 && ident[0] == "Value" {
					out = append(out, valueRead{mapping.Path(ident[1:]), fmt.Sprintf("the key template (%s)", k)})
				}
			}
		}
	}
	for _, c := range cols {
		if keys := valuePath(c.Field); len(keys) > 0 {
			out = append(out, valueRead{keys, fmt.Sprintf("column %s (%s)", c.Name, c.Field)})
		}
	}
	return append(out, v.sinkReads...)
}

// valuePath is the fields a value.<path> field reads, as a mapping path:
// the gjson path cut at its first key with a wildcard, a query or an
// escape; nil for another field.
func valuePath(field string) mapping.Path {
	f, err := ParseField(field)
	if err != nil || f.Kind != FieldValuePath {
		return nil
	}
	var keys mapping.Path
	for _, key := range strings.Split(f.Arg, ".") {
		if key == "" || strings.ContainsAny(key, `*?#|@\`) {
			break
		}
		keys = append(keys, key)
	}
	return keys
}

// at adds a problem of field at pos.
func (v *validator) at(pos Pos, field, format string, args ...any) {
	v.out = append(v.out, Problem{File: v.p.File, Line: pos.Line, Col: pos.Col, Field: field, Message: fmt.Sprintf(format, args...)})
}
