package plan

import (
	"strings"
	"testing"
)

// mappingPlan is minimalPlan with a JSONL sink keyed by .Value.id and the
// mapping section m.
func mappingPlan(m string) string {
	return strings.Replace(minimalPlan, "  path: out/orders.jsonl\n", "  path: out/orders.jsonl\n  key: '{{ .Value.id }}'\n", 1) + m
}

func TestMappingDecodes(t *testing.T) {
	p := mustParse(t, mappingPlan(`mapping:
  - set: {amount_eur: 'value.amount * 0.92', src: 'topic', value.a.b: '1'}
  - rename: {value.cust: customer, z: value.y}
  - drop: [value.debug, tmp]
`), testOptions())
	if len(p.Mapping) != 3 {
		t.Fatalf("%d steps, want 3", len(p.Mapping))
	}
	var got []string
	for _, s := range p.Mapping {
		for _, e := range s.Entries {
			got = append(got, s.Kind+" "+e.Path+" "+e.Arg)
		}
	}
	want := []string{"set amount_eur value.amount * 0.92", "set src topic", "set value.a.b 1", "rename value.cust customer", "rename z value.y", "drop value.debug ", "drop tmp "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("entries in file order:\n got %q\nwant %q", got, want)
	}
	m, err := p.MappingProgram()
	if err != nil || m == nil {
		t.Fatalf("MappingProgram: %v, %v", m, err)
	}
	if m, err := mustParse(t, minimalPlan, testOptions()).MappingProgram(); m != nil || err != nil {
		t.Errorf("a plan without mapping: %v, %v", m, err)
	}
}

func TestMappingProblems(t *testing.T) {
	cases := []struct{ mapping, want string }{
		{"mapping: {set: {a: '1'}}\n", "plan.yaml:13:10: mapping: want a list of steps (set, rename or drop), got a mapping"},
		{"mapping:\n  - set: {a: '1'}\n    drop: [b]\n", "plan.yaml:14:5: mapping: step 1: a step is exactly one of set, rename or drop, got a step with set, drop"},
		{"mapping:\n  - sett: {a: '1'}\n", `plan.yaml:14:5: mapping: step 1: unknown step "sett" (did you mean set?)`},
		{"mapping:\n  - drop: value.debug\n", `plan.yaml:14:11: mapping: step 1: drop wants a list of field paths, got "value.debug": write it as a list, e.g. [value.debug]`},
		{"mapping:\n  - set: [a]\n", "plan.yaml:14:10: mapping: step 1: set wants a mapping of field path to expression"},
		{"mapping:\n  - set: {a: '1', a: '2'}\n", "step 1: set lists a twice"},
		{"mapping:\n  - set:\n      x: 'value.amount *'\n", "plan.yaml:15:10: mapping: step 1: set value.x: bad expression at column"},
		{"mapping:\n  - set: {x: 'amount * 2'}\n", "plan.yaml:14:14: mapping: step 1: set value.x: bad expression at column 1: unknown name amount (an expression sees key, value, headers"},
		{"mapping:\n  - set: {x: 'format_time(timestamp, \"2006-01-02\")'}\n", "step 1: set value.x: bad expression at column 1: format_time needs a zone as its third argument"},
		{"mapping:\n  - set: {x: 'format_time(timestamp, \"2006\", \"Nowhere/City\")'}\n", `format_time: unknown zone "Nowhere/City"`},
		{"mapping:\n  - set: {value..x: '1'}\n", `plan.yaml:14:11: mapping: step 1: set: "value..x" has an empty key`},
		{"mapping:\n  - rename: {a: 'value'}\n", `plan.yaml:14:17: mapping: step 1: rename value.a: "value" is not a field of the value`},
		{"mapping:\n  - rename: {a: value.a}\n", "plan.yaml:14:17: mapping: step 1: rename value.a: renames the field to itself (a and value.a are the same field)"},
		{"mapping:\n  - drop: [value.id]\n", "plan.yaml:14:12: mapping: step 1 drops value.id, which the key template ({{ .Value.id }}) still reads"},
		{"mapping:\n  - rename: {id: order_id}\n", "plan.yaml:14:14: mapping: step 1 renames value.id, which the key template ({{ .Value.id }}) still reads"},
	}
	for _, c := range cases {
		got := parseProblems(t, mappingPlan(c.mapping), testOptions())
		if !strings.Contains(got, c.want) {
			t.Errorf("%s\n got %s\nwant %s", c.mapping, got, c.want)
		}
	}
}

func TestMappingKeepsReadFields(t *testing.T) {
	// A field dropped and set again, or the parent of the read one
	// renamed back, is read where it is.
	mustParse(t, mappingPlan("mapping:\n  - drop: [id]\n  - set: {id: 'offset'}\n"), testOptions())
	mustParse(t, mappingPlan("mapping:\n  - drop: [value.idx, id2]\n"), testOptions())
	columns := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n",
		"  type: sqlite\n  path: out/o.db\n  table: orders\n  columns: {id: key, cust: value.customer.id, raw: value}\n", 1)
	got := parseProblems(t, columns+"mapping:\n  - rename: {customer: cust}\n", testOptions())
	if want := "plan.yaml:15:14: mapping: step 1 renames value.customer, which column cust (value.customer.id) still reads"; !strings.Contains(got, want) {
		t.Errorf("got %s\nwant %s", got, want)
	}
	mustParse(t, columns+"mapping:\n  - rename: {cust: customer}\n  - drop: [customer.debug]\n", testOptions())
	// A database sink's version reads the mapped value too.
	versioned := strings.Replace(columns, "  table: orders\n", "  table: orders\n  version: value.updated_at\n", 1)
	got = parseProblems(t, versioned+"mapping:\n  - drop: [updated_at]\n", testOptions())
	if want := "mapping: step 1 drops value.updated_at, which sink.version (value.updated_at) still reads"; !strings.Contains(got, want) {
		t.Errorf("got %s\nwant %s", got, want)
	}
	mustParse(t, versioned+"mapping:\n  - rename: {updated_at: changed}\n  - set: {updated_at: 'value.changed'}\n", testOptions())
}

func TestMappingFingerprint(t *testing.T) {
	fp := func(src string) string { return mustParse(t, src, testOptions()).Fingerprint() }
	base := fp(mappingPlan(""))
	one := fp(mappingPlan("mapping:\n  - set: {a: 'value.amount * 0.92'}\n"))
	other := fp(mappingPlan("mapping:\n  - set: {a: 'value.amount * 0.93'}\n"))
	two := fp(mappingPlan("mapping:\n  - set: {a: 'value.amount * 0.92'}\n  - drop: [debug]\n"))
	swapped := fp(mappingPlan("mapping:\n  - set: {b: '1', a: '2'}\n"))
	inOrder := fp(mappingPlan("mapping:\n  - set: {a: '2', b: '1'}\n"))
	seen := map[string]bool{}
	for _, f := range []string{base, one, other, two, swapped, inOrder} {
		if seen[f] {
			t.Errorf("two different mappings share the fingerprint %s", f)
		}
		seen[f] = true
	}
	if again := fp(mappingPlan("mapping:\n  - set: {a: 'value.amount * 0.92'}\n")); again != one {
		t.Errorf("same mapping, fingerprints %s and %s", one, again)
	}
	if short, long := fp(mappingPlan("mapping:\n  - rename: {cust: customer}\n")), fp(mappingPlan("mapping:\n  - rename: {value.cust: value.customer}\n")); short != long {
		t.Errorf("value. is optional, yet the fingerprints differ: %s, %s", short, long)
	}
	if empty := fp(mappingPlan("mapping: []\n")); empty != base {
		t.Errorf("an empty mapping changed the fingerprint: %s, want %s", empty, base)
	}
}
