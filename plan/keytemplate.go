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

// templateFields lists, in order, the field paths (.Value.id: [Value id])
// the template under root reads with the record as dot: not those inside
// with and range, where dot is something else.
func templateFields(root *parse.ListNode) [][]string {
	var uses [][]string
	var walk func(n parse.Node)
	branch := func(b *parse.BranchNode, body bool) {
		walk(b.Pipe)
		if body {
			walk(b.List)
		}
		walk(b.ElseList)
	}
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
			branch(&n.BranchNode, true)
		case *parse.WithNode:
			branch(&n.BranchNode, false)
		case *parse.RangeNode:
			branch(&n.BranchNode, false)
		case *parse.FieldNode:
			uses = append(uses, n.Ident)
		case *parse.ChainNode:
			walk(n.Node)
		}
	}
	walk(root)
	return uses
}

// keyFieldProblem checks the fields a key template reads with the record
// as dot (.Value.id: [Value id]) against what it sees (`{{ .value.id }}`
// would fail on every record). Under decode.key (decodedKey), .Key may
// have fields.
func keyFieldProblem(root *parse.ListNode, decodedKey bool) string {
	for _, ident := range templateFields(root) {
		if len(ident) == 0 || decodedKey && ident[0] == "Key" {
			continue
		}
		name, first := "."+strings.Join(ident, "."), ident[0]
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
	}
	return ""
}

// keyUnique warns when a key template cannot tell apart different records:
// one that reads none of the record's fields, or only .Offset (and
// .Timestamp) on a plan of several partitions. Keys from the record's own
// key or value are business keys, meant to overwrite.
func (v *validator) keyUnique(field string, root *parse.ListNode) {
	reads := map[string]bool{} // the record's fields the template reads
	for _, ident := range templateFields(root) {
		if len(ident) > 0 {
			reads[ident[0]] = true
		}
	}
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
	ps, w := v.p.Source.Partitions, v.p.Window
	return (ps.All || len(ps.List) != 1) && !(len(w.Offsets) == 1 && w.OffsetsAll == nil)
}
