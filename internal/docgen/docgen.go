// Package docgen renders the parts of the docs that are generated from the
// sink descriptors (the sink types and their fields), and splices them into
// a page between markers:
//
//	<!-- BEGIN GENERATED: NAME -->
//	...
//	<!-- END GENERATED -->
//
// It reads the descriptors only through the catalog (registry.Catalog, or
// the one given to BlocksOf): a sink type's page follows from its
// descriptor alone.
// TestDocs compares the pages under docs/ with what it renders, and rewrites
// them with -update (or REPLAY_UPDATE_DOCS=1).
package docgen

import (
	"fmt"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// SinkTypeNames returns the sink types, one page docs/sinks/<type>.md each.
func SinkTypeNames() []string {
	types := registry.Catalog()
	out := make([]string, len(types))
	for i, d := range types {
		out[i] = string(d.Type)
	}
	return out
}

// Blocks returns the generated blocks a page may hold, by name: "sink-types"
// (every type with its required and optional fields), "common-fields" (the
// fields every sink takes) and "fields: <type>" (one type's own fields).
func Blocks() map[string]string { return BlocksOf(registry.Catalog()) }

// BlocksOf is Blocks for the sink types of types, in its order.
func BlocksOf(types plan.SinkCatalog) map[string]string {
	commonFields := types.CommonFields()
	var common []string
	for _, f := range commonFields {
		common = append(common, f.Name)
	}
	out := map[string]string{}

	var b strings.Builder
	b.WriteString("| type | writes to | required fields | optional fields |\n|---|---|---|---|\n")
	for _, d := range types {
		var opt []string
		for _, f := range d.Fields {
			if f.Required == "" {
				opt = append(opt, f.Name)
			}
		}
		fmt.Fprintf(&b, "| [`%s`](sinks/%s.md) | %s | %s | %s |\n", d.Type, d.Type, cell(d.Summary), codes(d.Required()), codes(opt))
	}
	out["sink-types"] = b.String()

	b.Reset()
	b.WriteString("| field | description |\n|---|---|\n")
	for _, f := range commonFields {
		fmt.Fprintf(&b, "| `%s` | %s |\n", f.Name, cell(f.Doc))
	}
	out["common-fields"] = b.String()

	for _, d := range types {
		b.Reset()
		fmt.Fprintf(&b, "`type: %s`: %s.\n\n", d.Type, cell(d.Summary))
		if len(d.Fields) == 0 {
			b.WriteString("This sink takes no fields of its own.\n")
		} else {
			b.WriteString("| field | required | description |\n|---|---|---|\n")
			// The required fields first, then the others, each in descriptor order.
			for _, req := range []string{"**yes**", "no"} {
				for _, f := range d.Fields {
					if (f.Required != "") == (req != "no") {
						fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Name, req, cell(f.Doc))
					}
				}
			}
		}
		fmt.Fprintf(&b, "\nEvery sink also takes %s ([the plan reference](../plan.md#sink)).\n", codes(common))
		out["fields: "+string(d.Type)] = b.String()
	}
	return out
}

// cell escapes text for a Markdown table cell: a | would end the cell, and
// a <name> would read as an HTML tag.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

func codes(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}

const (
	beginPrefix = "<!-- BEGIN GENERATED: "
	beginSuffix = " -->"
	end         = "<!-- END GENERATED -->"
)

// Splice returns page with every generated block replaced by what blocks
// holds under its name, and the names of the blocks it found. A block
// whose name blocks does not know, a BEGIN without its END or an END
// without its BEGIN is an error.
func Splice(page string, blocks map[string]string) (string, []string, error) {
	var out strings.Builder
	var names []string
	rest := page
	for {
		i := strings.Index(rest, beginPrefix)
		if j := strings.Index(rest, end); j >= 0 && (i < 0 || j < i) {
			return "", nil, fmt.Errorf("%q without %q before it", end, beginPrefix+"NAME"+beginSuffix)
		}
		if i < 0 {
			out.WriteString(rest)
			return out.String(), names, nil
		}
		line, after, ok := strings.Cut(rest[i:], "\n")
		name, ok2 := strings.CutSuffix(strings.TrimPrefix(line, beginPrefix), beginSuffix)
		if !ok || !ok2 {
			return "", nil, fmt.Errorf("malformed marker %q: want %q on a line of its own", line, beginPrefix+"NAME"+beginSuffix)
		}
		body, ok := blocks[name]
		if !ok {
			return "", nil, fmt.Errorf("%q: no generated block of that name", line)
		}
		k := strings.Index(after, end)
		if k < 0 {
			return "", nil, fmt.Errorf("%q without %q", line, end)
		}
		if n := strings.Index(after[:k], beginPrefix); n >= 0 {
			return "", nil, fmt.Errorf("%q: another BEGIN before its END", line)
		}
		names = append(names, name)
		out.WriteString(rest[:i])
		out.WriteString(line + "\n" + body + end)
		rest = after[k+len(end):]
	}
}
