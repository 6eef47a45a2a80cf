package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// printedSchema runs `replay schema` and decodes its output.
func printedSchema(t *testing.T) map[string]any {
	t.Helper()
	code, out, errs := groupTestExec(t, "schema")
	if code != exitOK {
		t.Fatalf("schema exited %d: %s", code, errs)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("schema output is not JSON: %v\n%s", err, out)
	}
	return s
}

func TestSchemaIsJSONSchema2020(t *testing.T) {
	s := printedSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["type"] != "object" {
		t.Fatalf("$schema %v, type %v", s["$schema"], s["type"])
	}
	// It compiles: it is valid against the 2020-12 meta-schema, its patterns
	// compile and every $ref resolves.
	compiledSchema(t)
}

// The schema names every yaml field of plan.Plan, recursively, with a
// description: a field added to the plan without a description (or a new
// self-decoding type without a schema) fails here.
func TestSchemaNamesEveryPlanField(t *testing.T) {
	s := printedSchema(t)
	var walk func(typ reflect.Type, node map[string]any, path string)
	walk = func(typ reflect.Type, node map[string]any, path string) {
		node = deref(s, node)
		if node["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties must be false, is %v", path, node["additionalProperties"])
		}
		props, _ := node["properties"].(map[string]any)
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			field := strings.TrimPrefix(path+"."+name, ".")
			prop, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s (%s.%s) is not in the schema", field, typ.Name(), f.Name)
				continue
			}
			if d, _ := prop["description"].(string); d == "" {
				t.Errorf("%s has no description: add %q to fieldDocs", field, typ.Name()+"."+name)
			}
			ft := f.Type
			// A self-decoding slice (plan.Columns) has its own schema.
			for (ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice) && !reflect.PointerTo(ft).Implements(yamlUnmarshaler) {
				ft = ft.Elem()
			}
			switch {
			case reflect.PointerTo(ft).Implements(yamlUnmarshaler):
			case ft.Kind() == reflect.Struct:
				walk(ft, prop, field)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), deref(s, prop)["additionalProperties"].(map[string]any), field+".*")
			}
		}
	}
	walk(reflect.TypeFor[plan.Plan](), s, "")
}

// Every object in the schema closes its properties, so a misspelt key is
// flagged in the editor as `replay validate` flags it.
func TestSchemaRejectsAdditionalProperties(t *testing.T) {
	s := printedSchema(t)
	var visit func(node any, path string)
	visit = func(node any, path string) {
		switch n := node.(type) {
		case map[string]any:
			if _, ok := n["properties"]; ok && n["type"] == "object" && n["additionalProperties"] != false {
				t.Errorf("%s: an object with properties must have additionalProperties: false", path)
			}
			for k, c := range n {
				visit(c, path+"/"+k)
			}
		case []any:
			for i, c := range n {
				visit(c, fmt.Sprintf("%s/%d", path, i))
			}
		}
	}
	visit(s, "#")
	sch := compiledSchema(t)
	for _, key := range []string{"colour: red", "source: {brokers: [\"k:9092\"], topic: t, isolaton: read_committed}"} {
		doc := strings.Replace(schemaTestPlan, "owner: data-platform", key, 1)
		if strings.HasPrefix(key, "source:") {
			doc = strings.Replace(schemaTestPlan, `source: {brokers: ["k:9092"], topic: orders}`, key, 1)
		}
		if err := validateYAML(t, sch, doc); err == nil {
			t.Errorf("a plan with %q validates", key)
		}
	}
}

const schemaTestPlan = `version: 1
name: schema-test
owner: data-platform
source: {brokers: ["k:9092"], topic: orders}
group: replay.schema-test
window:
  from: 2026-11-03T10:00:00Z
  to: 2026-11-03T12:30:00Z
sink: {type: file, path: out.jsonl}
`

// The example plans and the valid test plans validate against the schema.
func TestSchemaAcceptsValidPlans(t *testing.T) {
	sch := compiledSchema(t)
	files, _ := filepath.Glob("../../plans/*.yaml")
	more, _ := filepath.Glob("../../plan/testdata/valid/*.yaml")
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateYAML(t, sch, string(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := validateYAML(t, sch, schemaTestPlan); err != nil {
		t.Errorf("schemaTestPlan: %v", err)
	}
}

// Mistakes the schema catches, named by what the plan does wrong.
func TestSchemaRejects(t *testing.T) {
	sch := compiledSchema(t)
	for _, tc := range []struct{ name, old, new string }{
		{"zone-less time", "from: 2026-11-03T10:00:00Z", "from: 2026-11-03T10:00:00"},
		{"bare seconds", "from: 2026-11-03T10:00:00Z", "from: 1762164000"},
		{"time and offsets", "  to: 2026-11-03T12:30:00Z", "  offsets: {0: {from: 1, to: 2}}"},
		{"bad isolation", "topic: orders}", "topic: orders, isolation: read-committed}"},
		{"unknown sink type", "type: file, path: out.jsonl", "type: mysql, path: out.db"},
		{"sqlite sink without table", "type: file, path: out.jsonl", "type: sqlite, path: out.db"},
		{"kafka sink without topic", "type: file, path: out.jsonl", `type: kafka, brokers: ["k:9092"]`},
		{"http sink without url", "type: file, path: out.jsonl", "type: http"},
		{"file sink without path", "type: file, path: out.jsonl", "type: file"},
		{"literal sasl password", "topic: orders}", "topic: orders, sasl: {mechanism: PLAIN, username: u, password: hunter2}}"},
		{"duration without unit", "  to: 2026-11-03T12:30:00Z", "  skew_margin: 300"},
		{"missing group", "group: replay.schema-test\n", ""},
		{"version 2", "version: 1", "version: 2"},
		{"batch size 0", "path: out.jsonl}", "path: out.jsonl, batch_size: 0}"},
		{"max_errors as a fraction", "group: replay.schema-test\n", "group: replay.schema-test\non_error: skip\nmax_errors: 0.01\n"},
		{"negative max_errors", "group: replay.schema-test\n", "group: replay.schema-test\non_error: skip\nmax_errors: -1\n"},
		{"csv without columns", "path: out.jsonl}", "path: out.csv, format: csv}"},
		{"unknown format", "path: out.jsonl}", "path: out.csv, format: parquet}"},
		{"unknown column field", "path: out.jsonl}", "path: out.csv, format: csv, columns: {o: ofset}}"},
		{"columns as a list", "path: out.jsonl}", "path: out.csv, format: csv, columns: [offset]}"},
		{"copy_threshold 0", "type: file, path: out.jsonl}", "type: postgres, dsn: '${DSN}', table: t, copy_threshold: 0}"},
	} {
		doc := strings.Replace(schemaTestPlan, tc.old, tc.new, 1)
		if doc == schemaTestPlan {
			t.Fatalf("%s: %q is not in the test plan", tc.name, tc.old)
		}
		if err := validateYAML(t, sch, doc); err == nil {
			t.Errorf("%s: the schema accepts it", tc.name)
		}
	}
}

// The schema requires, for each sink type, the fields its descriptor
// requires: without any one of them a plan is rejected, with all of them
// (and a throttle) it is accepted.
func TestSchemaSinkRequiredFieldsFollowDescriptors(t *testing.T) {
	sch := compiledSchema(t)
	values := map[string]string{"path": "out.db", "dsn": "'${DSN}'", "table": "t", "brokers": `["k:9092"]`, "topic": "orders-fixed", "url": "'https://svc.internal/api'"}
	for _, d := range registry.Catalog() {
		fields := func(skip string) string {
			var out string
			for _, f := range d.Required() {
				if f != skip {
					out += ", " + f + ": " + values[f]
				}
			}
			return out
		}
		doc := func(skip string) string {
			return strings.Replace(schemaTestPlan, "sink: {type: file, path: out.jsonl}", "sink: {type: "+string(d.Type)+fields(skip)+"}", 1)
		}
		if err := validateYAML(t, sch, doc("")); err != nil {
			t.Errorf("%s sink with %v: %v", d.Type, d.Required(), err)
		}
		for _, f := range d.Required() {
			if err := validateYAML(t, sch, doc(f)); err == nil {
				t.Errorf("%s sink without %s: the schema accepts it", d.Type, f)
			}
		}
	}
}

// The enums list exactly what `replay validate` accepts: each value passes
// validation, and the values the format reserves for later do not (when a
// sink or policy becomes available, this test asks for the schema to follow).
func TestSchemaEnumsMatchValidation(t *testing.T) {
	// sinkNeeds are the fields each sink type requires (and only those: a
	// field another type takes is a problem).
	sinkNeeds := map[string]string{
		"file":     ", path: out.jsonl",
		"postgres": ", dsn: '${DSN}', table: t",
		"sqlite":   ", path: out.db, table: t",
		"kafka":    `, brokers: ["k:9092"], topic: orders-fixed`,
		"http":     ", url: 'https://svc.internal/api'",
		"parquet":  ", path: out/orders/",
	}
	s := printedSchema(t)
	env := func(name string) (string, bool) {
		return map[string]string{"DSN": "postgres://u:pw@db/x", "PW": "secret"}[name], true
	}
	for _, tc := range []struct {
		field    string   // problem field in plan
		path     []string // property path in the schema
		doc      string   // the plan, %s is the value
		reserved []string
	}{
		{"source.isolation", []string{"source", "isolation"}, `source: {brokers: ["k:9092"], topic: orders, isolation: %s}`, nil},
		{"source.sasl.mechanism", []string{"source", "sasl", "mechanism"}, `source: {brokers: ["k:9092"], topic: orders, sasl: {mechanism: %s, username: u, password: "${PW}"}}`, nil},
		{"sink.type", []string{"sink", "type"}, "sink: {type: %s}", []string{"mysql"}},
		{"sink.on_conflict", []string{"sink", "on_conflict"}, "sink: {type: postgres, dsn: '${DSN}', table: t, on_conflict: %s}", []string{"replace"}},
		{"on_error", []string{"on_error"}, "on_error: %s\ndead_letter: {type: file, path: dead.jsonl}", nil},
	} {
		values := enumAt(s, tc.path)
		if len(values) == 0 {
			t.Fatalf("%s: no enum in the schema", tc.field)
		}
		all := slices.Clone(values)
		for _, r := range tc.reserved {
			if !slices.Contains(all, r) {
				all = append(all, r)
			}
		}
		for _, val := range all {
			doc := schemaTestPlan + "throttle: {records_per_second: 10}\n"
			line := fmt.Sprintf(tc.doc, val)
			if tc.field == "sink.type" { // with what that type needs
				line = fmt.Sprintf("sink: {type: %s%s}", val, sinkNeeds[val])
			}
			key := line[:strings.Index(line, ":")+1]
			if i := strings.Index(doc, "\n"+key); i >= 0 {
				end := i + 1 + strings.Index(doc[i+1:], "\n")
				doc = doc[:i+1] + line + doc[end:]
			} else {
				doc += line + "\n"
			}
			_, err := plan.Parse("enum.yaml", []byte(doc), plan.LoadOptions{Sinks: registry.Catalog(), LookupEnv: env, Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }})
			var inv *plan.InvalidError
			if err != nil && !errors.As(err, &inv) {
				t.Fatal(err)
			}
			var atField []string
			if inv != nil {
				for _, p := range inv.Errors() {
					if p.Field == tc.field {
						atField = append(atField, p.Message)
					}
					if p.Field != tc.field && slices.Contains(values, val) {
						t.Errorf("%s=%s: unrelated problem in the test plan: %s", tc.field, val, p)
					}
				}
			}
			reserved := !slices.Contains(values, val)
			switch {
			case reserved && len(atField) == 0:
				t.Errorf("%s: validate accepts %q now: add it to the schema's enum", tc.field, val)
			case !reserved && len(atField) > 0:
				t.Errorf("%s: the schema allows %q, validate rejects it: %v", tc.field, val, atField)
			}
		}
	}
}

// compiledSchema compiles the printed schema with a JSON Schema 2020-12
// validator, which also checks it against the 2020-12 meta-schema.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(printedSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("replay-plan.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("replay-plan.schema.json")
	if err != nil {
		t.Fatalf("compile the schema: %v", err)
	}
	return sch
}

// validateYAML decodes a plan as the YAML language server does (YAML 1.2
// core schema: keys and timestamps are strings) and validates it: nil when
// the schema accepts it.
func validateYAML(t *testing.T, sch *jsonschema.Schema, doc string) error {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jsonValue(t, n.Content[0]))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// deref follows $refs into the schema's $defs.
func deref(root, node map[string]any) map[string]any {
	for {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		node = root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
	}
}

// enumAt returns the enum of the property at path (inside an anyOf).
func enumAt(root map[string]any, path []string) []string {
	node := root
	for _, p := range path {
		node = deref(root, node)["properties"].(map[string]any)[p].(map[string]any)
	}
	var out []string
	for _, alt := range append([]any{node}, asSlice(node["anyOf"])...) {
		for _, e := range asSlice(alt.(map[string]any)["enum"]) {
			out = append(out, e.(string))
		}
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// jsonValue converts a YAML node to the JSON value an editor validates.
func jsonValue(t *testing.T, n *yaml.Node) any {
	t.Helper()
	switch n.Kind {
	case yaml.AliasNode:
		return jsonValue(t, n.Alias)
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = jsonValue(t, n.Content[i+1])
		}
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = jsonValue(t, c)
		}
		return out
	}
	switch n.ShortTag() {
	case "!!int", "!!float", "!!bool", "!!null":
		var x any
		if err := n.Decode(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	return n.Value // !!str, !!timestamp
}

// printSchemas names the registry once, however many layers of the error
// said "schema registry".
func TestPrintSchemasRegistryError(t *testing.T) {
	var b strings.Builder
	printSchemas(&b, planView{Decodes: true, SchemaError: "decode: schema registry: schema registry: GET http://sr:8081/subjects: HTTP 500 (still failing after 7 attempts over 4s, the 30s limit of replay plan)"})
	want := "schema registry: GET http://sr:8081/subjects: HTTP 500 (still failing after 7 attempts over 4s, the 30s limit of replay plan) (the schema ids below are as the records carry them)\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
