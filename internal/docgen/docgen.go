// Package docgen renders the parts of the docs that are generated from the
// sink descriptors (the sink types and their fields). Its test splices them
// into the pages between markers:
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
)

// BlocksOf returns the generated blocks a page may hold, by name, for the
// sink types of types, in its order: "sink-types" (every type with its
// required and optional fields), "common-fields" (the fields every sink
// takes) and "fields: <type>" (one type's own fields).
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
