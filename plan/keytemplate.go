package plan

import (
	"fmt"
	"slices"
	"strings"
	"text/template/parse"
)

// KeyFields are the fields a key template sees (the sinks' Keyer): Topic,
// Partition, Offset and Key are strings or numbers, Timestamp a time.Time,
// Value the value parsed as JSON and Headers the header map.
var KeyFields = []string{"Topic", "Partition", "Offset", "Timestamp", "Key", "Value", "Headers"}

// scalarKeyFields have no fields of their own: .Key.id is a mistake.
var scalarKeyFields = []string{"Topic", "Partition", "Offset", "Key"}

// keyFieldProblem checks the fields a key template reads against what it
// sees, so that `{{ .value.id }}` is refused by validate instead of failing
// on every record of the run. Only the pipelines evaluated with the record
// as dot are checked: inside with and range, dot is something else.
func keyFieldProblem(root *parse.ListNode) string {
	var problem string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if problem != "" || n == nil {
			return
		}
		switch n := n.(type) {
		case *parse.ListNode:
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe) // its body sees another dot
		case *parse.RangeNode:
			walk(n.Pipe)
		case *parse.FieldNode:
			problem = keyFieldPathProblem(n.Ident)
		case *parse.ChainNode:
			walk(n.Node)
		}
	}
	walk(root)
	return problem
}

// keyFieldPathProblem checks one field path (.Value.id: [Value id]).
func keyFieldPathProblem(ident []string) string {
	if len(ident) == 0 {
		return ""
	}
	name := "." + strings.Join(ident, ".")
	first := ident[0]
	if !slices.Contains(KeyFields, first) {
		hint := ""
		for _, f := range KeyFields {
			if strings.EqualFold(f, first) {
				hint = fmt.Sprintf(" (did you mean .%s?)", strings.Join(append([]string{f}, ident[1:]...), "."))
			}
		}
		return fmt.Sprintf("%s: a key template sees .%s only%s; every record would fail this template", name, strings.Join(KeyFields, ", ."), hint)
	}
	if len(ident) > 1 && slices.Contains(scalarKeyFields, first) {
		return fmt.Sprintf("%s: .%s is a plain value without fields; for a field of the JSON value write .Value.%s", name, first, strings.Join(ident[1:], "."))
	}
	return ""
}

// keyReads reports which of the record's fields a key template reads.
func keyReads(root *parse.ListNode) map[string]bool {
	reads := map[string]bool{}
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.FieldNode:
			reads[n.Ident[0]] = true
		case *parse.ChainNode:
			walk(n.Node)
		}
	}
	walk(root)
	return reads
}

// keyUnique warns when a key template cannot tell apart records that are
// different: one that reads only .Offset (or .Offset and .Timestamp) gives
// records of different partitions the same key on any plan that reads
// more than one partition, and one that reads none of the record's fields
// gives every record one key. Keys built from the record's own key or
// value are business keys: a later record of the same key is meant to
// overwrite the earlier one.
func (v *validator) keyUnique(field string, s *Sink, root *parse.ListNode) {
	reads := keyReads(root)
	switch {
	case len(reads) == 0:
		v.warn(field+".key", "the key template reads no field of the record: every record gets the same key and overwrites the one before; use e.g. '{{ .Value.id }}', or leave key out for <topic>/<partition>/<offset>")
	case reads["Offset"] && !reads["Partition"] && !reads["Key"] && !reads["Value"] && !reads["Headers"] && v.multiPartition():
		v.warn(field+".key", "offsets repeat across partitions: records of different partitions with the same offset get the same key and overwrite each other; add {{ .Partition }}, e.g. '{{ .Partition }}-{{ .Offset }}'")
	}
}

// multiPartition reports whether the plan may read more than one
// partition: all of them, or a list of several.
func (v *validator) multiPartition() bool {
	ps := v.p.Source.Partitions
	if !ps.All && len(ps.List) == 1 {
		return false
	}
	return !(len(v.p.Window.Offsets) == 1 && v.p.Window.OffsetsAll == nil)
}
