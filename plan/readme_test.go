package plan

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeSinkFields parses the README's table of sink fields: for each sink
// type, the fields it requires and the ones it also takes, and the fields
// the sentence above the table says every sink takes (under "*").
func readmeSinkFields(t *testing.T, readme string) (required, optional map[string][]string) {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "**Sink fields.** Every sink takes ")
	if !ok {
		t.Fatal("README.md: no \"**Sink fields.** Every sink takes\" paragraph")
	}
	common, rest, _ := strings.Cut(rest, ".")
	required = map[string][]string{"*": nil}
	optional = map[string][]string{"*": codeSpans(common)}
	_, table, ok := strings.Cut(rest, "| type | required fields | optional fields |\n|---|---|---|\n")
	if !ok {
		t.Fatal("README.md: no \"| type | required fields | optional fields |\" table after the Sink fields paragraph")
	}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("README.md: sink fields row %q: want 3 cells", line)
		}
		typ := codeSpans(cells[0])
		if len(typ) != 1 {
			t.Fatalf("README.md: sink fields row %q: want one `type` in the first cell", line)
		}
		required[typ[0]], optional[typ[0]] = codeSpans(cells[1]), codeSpans(cells[2])
	}
	return required, optional
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// The README's sink reference agrees with the sink descriptors: the same
// sink types, and for each the same required and optional fields; no field
// the descriptors do not know.
func TestREADMESinkFieldsMatchDescriptors(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	required, optional := readmeSinkFields(t, string(b))
	var common []string
	for _, f := range SinkFields() {
		if len(f.Types) == 0 {
			common = append(common, f.Name)
		}
	}
	want := map[string][2][]string{"*": {nil, common}}
	for _, d := range SinkTypes() {
		var opt []string
		for _, f := range d.Fields {
			if !slices.Contains(d.Required, f) {
				opt = append(opt, f)
			}
		}
		want[string(d.Type)] = [2][]string{d.Required, opt}
	}
	for typ, w := range want {
		name := typ + " sink"
		if typ == "*" {
			name = "every sink"
		}
		if _, ok := optional[typ]; !ok {
			t.Errorf("README.md: the sink fields table has no row for the %s sink", typ)
			continue
		}
		if got := sorted(required[typ]); !slices.Equal(got, sorted(w[0])) {
			t.Errorf("README.md: %s: required fields %v, the descriptors say %v", name, got, sorted(w[0]))
		}
		if got := sorted(optional[typ]); !slices.Equal(got, sorted(w[1])) {
			t.Errorf("README.md: %s: optional fields %v, the descriptors say %v", name, got, sorted(w[1]))
		}
	}
	for typ := range optional {
		if _, ok := want[typ]; !ok {
			t.Errorf("README.md: the sink fields table has a row for %q, which is not a sink type", typ)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
