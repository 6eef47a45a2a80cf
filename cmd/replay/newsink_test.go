package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/replay-tool/replay/internal/docgen"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/replay-tool/replay/sinks/sinktest/memsink"
)

// memoryPlan is a plan whose sink is of the test-only type memory; %s is
// the rest of its sink section.
const memoryPlan = `version: 1
name: new-sink
source: {brokers: ["k:9092"], topic: orders}
group: replay.new-sink
window:
  from: 2026-11-03T10:00:00Z
  to: 2026-11-03T12:30:00Z
sink: {type: memory%s}
`

// withMemory is the drivers' catalog and the test-only memory sink type,
// whose package (sinks/sinktest/memsink) is all it takes: nothing in plan/,
// cmd/ or the registry knows it.
func withMemory() plan.SinkCatalog { return append(registry.Catalog(), memsink.Descriptor) }

func parseMemory(t *testing.T, rest string) (*plan.Plan, error) {
	t.Helper()
	return plan.Parse("plan.yaml", []byte(strings.Replace(memoryPlan, "%s", rest, 1)), plan.LoadOptions{
		Sinks: withMemory(), Now: func() time.Time { return time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC) },
		LookupEnv: func(name string) (string, bool) { return map[string]string{"MEM_TOKEN": "t0k3n-s3cr3t"}[name], true }})
}

// A sink type declared by its package alone validates (its required field,
// its own check, its enum, its secret, the fields of other types), takes
// its defaults, and is written by its Open.
func TestNewSinkTypeValidates(t *testing.T) {
	p, err := parseMemory(t, ", bucket: orders, token: '${MEM_TOKEN}'")
	if err != nil {
		t.Fatal(err)
	}
	c := plan.ConfigOf[memsink.Section](&p.Sink)
	if c.Bucket != "orders" || c.Capacity != memsink.DefaultCapacity || c.Mode != "append" || c.Token != "t0k3n-s3cr3t" {
		t.Errorf("section %+v: want bucket orders, the default capacity and mode, the token from the environment", *c)
	}
	if !strings.Contains(strings.Join(p.Secrets(), " "), "t0k3n-s3cr3t") {
		t.Errorf("Secrets() = %v: want the token", p.Secrets())
	}
	for _, tc := range []struct{ rest, want string }{
		{"", `plan.yaml:8:7: sink.bucket: missing: the bucket to write to, e.g. orders`},
		{", bucket: orders, capacity: 20000", `sink.capacity: 20000: want 1..10000 records`},
		{", bucket: orders, mode: overwrite", `sink.mode: "overwrite" is not one of append, replace`},
		{", bucket: orders, token: abc123", `sink.token: a literal secret must not be written in a plan`},
		{", bucket: orders, buckets: x", `plan.yaml:8:38: sink.buckets: unknown field "buckets" in sink (did you mean "bucket"?)`},
		{", bucket: orders, path: out.jsonl", `sink.path: does not apply to a memory sink (only file and sqlite and parquet sinks take it): remove it`},
		{", bucket: orders, capacity: lots", `sink.capacity: want a whole number, got "lots"`},
	} {
		_, err := parseMemory(t, tc.rest)
		var inv *plan.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sink {type: memory%s}: %v, want %q", tc.rest, err, tc.want)
		}
	}
	// Its field on a type that does not take it is refused as any other.
	_, err = plan.Parse("plan.yaml", []byte(strings.Replace(memoryPlan, "{type: memory%s}", "{type: file, path: o.jsonl, bucket: orders}", 1)), plan.LoadOptions{Sinks: withMemory()})
	if want := "sink.bucket: does not apply to a file sink (only memory sinks take it): remove it"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bucket on a file sink: %v, want %q", err, want)
	}

	s, err := memsink.Open(t.Context(), sinks.Spec{Plan: p.Sink})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), []record.Record{{Topic: "orders", Offset: 7, Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if got := s.(*memsink.Sink).Records(); len(got) != 1 || got[0].Offset != 7 {
		t.Errorf("the bucket holds %v, want offset 7", got)
	}
}

// The fingerprint holds what the type marks (bucket, mode but its
// default), under its config's field names, and nothing else of it.
func TestNewSinkTypeFingerprints(t *testing.T) {
	fp := func(rest string) string {
		t.Helper()
		p, err := parseMemory(t, rest)
		if err != nil {
			t.Fatal(err)
		}
		return p.Fingerprint()
	}
	base := fp(", bucket: orders")
	for _, tc := range []struct {
		rest string
		same bool
	}{
		{", bucket: orders, capacity: 5", true},             // how, not what: left out
		{", bucket: orders, mode: append", true},            // the default, written out
		{", bucket: orders, token: '${MEM_TOKEN}'", true},   // a credential
		{", bucket: orders-fixed", false},                   // the target
		{", bucket: orders, mode: replace", false},          // what a write does
		{", bucket: orders, key: '{{ .Value.id }}'", false}, // a common field
	} {
		if got := fp(tc.rest) == base; got != tc.same {
			t.Errorf("sink {type: memory%s}: same fingerprint %v, want %v", tc.rest, got, tc.same)
		}
	}
}

// The JSON Schema (`replay schema`) describes the type's fields, typed
// after its config struct, with its docs and its required field.
func TestNewSinkTypeInSchema(t *testing.T) {
	gen, err := planSchema(withMemory())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(gen)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any // as `replay schema` prints it
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	props := deref(s, s["properties"].(map[string]any)["sink"].(map[string]any))["properties"].(map[string]any)
	for _, name := range []string{"bucket", "capacity", "mode", "token"} {
		prop, ok := props[name].(map[string]any)
		if d, _ := prop["description"].(string); !ok || !strings.HasPrefix(d, "memory: ") {
			t.Errorf("sink.%s: %v, want its doc", name, props[name])
		}
	}
	if got := enumAt(s, []string{"sink", "type"}); !strings.Contains(strings.Join(got, " "), "memory") {
		t.Errorf("sink.type enum %v: want memory", got)
	}
	if got := enumAt(s, []string{"sink", "mode"}); strings.Join(got, " ") != "append replace" {
		t.Errorf("sink.mode enum %v, want append, replace", got)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("plan.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("plan.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	ok := strings.Replace(memoryPlan, "%s", ", bucket: orders, capacity: 5", 1)
	if err := validateYAML(t, sch, ok); err != nil {
		t.Errorf("a memory sink with its bucket: %v", err)
	}
	for _, bad := range []string{"", ", bucket: orders, capacity: 20000", ", bucket: orders, buckets: x"} {
		if validateYAML(t, sch, strings.Replace(memoryPlan, "%s", bad, 1)) == nil {
			t.Errorf("sink {type: memory%s}: the schema accepts it", bad)
		}
	}
}

// The docs generator renders the type: a row of the sink types' table and
// the table of its own fields.
func TestNewSinkTypeInDocs(t *testing.T) {
	blocks := docgen.BlocksOf(withMemory())
	if row := "| [`memory`](sinks/memory.md) | bucket in memory, for tests | `bucket` | `capacity`, `mode`, `token` |"; !strings.Contains(blocks["sink-types"], row) {
		t.Errorf("sink-types:\n%s\nwant the row %s", blocks["sink-types"], row)
	}
	fields := blocks["fields: memory"]
	for _, want := range []string{"`type: memory`: bucket in memory, for tests.", "| `bucket` | **yes** | memory: the bucket the records go to. |", "| `capacity` | no | memory: the most records"} {
		if !strings.Contains(fields, want) {
			t.Errorf("fields: memory:\n%s\nwant %q", fields, want)
		}
	}
}
