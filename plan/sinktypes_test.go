package plan

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The descriptors describe the structs: every yaml field of Sink is a
// common field and every common field one of Sink; each type's field
// descriptors name the yaml fields of its config struct, each with a doc,
// and no other; a required field says what is missing.
func TestSinkDescriptorsMatchSink(t *testing.T) {
	var yamlFields []string
	st := reflect.TypeFor[Sink]()
	for i := 0; i < st.NumField(); i++ {
		if name := strings.Split(st.Field(i).Tag.Get("yaml"), ",")[0]; name != "" && name != "-" {
			yamlFields = append(yamlFields, name)
		}
	}
	var common []string
	for _, f := range testSinks.CommonFields() {
		common = append(common, f.Name)
		if f.Doc == "" {
			t.Errorf("common sink field %s has no doc", f.Name)
		}
	}
	if !slices.Equal(sorted(yamlFields), sorted(common)) {
		t.Errorf("Sink's yaml fields %v, the common field descriptors %v", sorted(yamlFields), sorted(common))
	}
	for _, d := range testSinks {
		if d.Summary == "" {
			t.Errorf("%s: no summary", d.Type)
		}
		var described []string
		for _, f := range d.Fields {
			described = append(described, f.Name)
			if f.Doc == "" {
				t.Errorf("%s sink field %s has no doc", d.Type, f.Name)
			}
			if f.Required != "" && !strings.HasPrefix(f.Required, "missing: ") {
				t.Errorf("%s sink field %s: Required %q does not say what is missing", d.Type, f.Name, f.Required)
			}
			if slices.Contains(common, f.Name) {
				t.Errorf("%s sink field %s is a common field", d.Type, f.Name)
			}
		}
		if got := d.ConfigNames(); !slices.Equal(sorted(got), sorted(described)) {
			t.Errorf("%s: the config's yaml fields %v, the field descriptors %v", d.Type, sorted(got), sorted(described))
		}
	}
}

// The catalog lists the types in the order messages list them.
func TestSinkTypesOrder(t *testing.T) {
	if got, want := strs(testSinks.Types()), []string{"file", "postgres", "sqlite", "kafka", "http", "stdout", "parquet"}; !slices.Equal(got, want) {
		t.Errorf("Types() = %v, want %v", got, want)
	}
	if _, ok := testSinks.Lookup("mysql"); ok {
		t.Error(`Lookup("mysql") found a descriptor`)
	}
	if shared := strs(testSinks.SharedTypes()); !slices.Equal(shared, []string{"postgres", "kafka", "http"}) {
		t.Errorf("SharedTypes() = %v, want postgres, kafka, http", shared)
	}
}

// A sink that gives only its type is told about each field its descriptor
// requires, at the sink.
func TestSinkRequiredFields(t *testing.T) {
	for _, d := range testSinks {
		src := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n", "  type: "+string(d.Type)+"\n", 1)
		_, err := Parse("plan.yaml", []byte(src+"throttle: {records_per_second: 10}\n"), testOptions())
		var missing []string
		var inv *InvalidError
		if errors.As(err, &inv) {
			for _, p := range inv.Errors() {
				if strings.HasPrefix(p.Message, "missing: ") {
					missing = append(missing, strings.TrimPrefix(p.Field, "sink."))
				}
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(missing, d.Required()) {
			t.Errorf("%s sink without fields: missing %v, want %v (%v)", d.Type, missing, d.Required(), err)
		}
	}
}

// A plan loaded without a catalog is refused with an error that says so,
// rather than with every sink type unknown.
func TestParseNeedsSinks(t *testing.T) {
	_, err := Parse("plan.yaml", []byte(minimalPlan), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "LoadOptions.Sinks") {
		t.Errorf("Parse without Sinks: %v, want an error naming LoadOptions.Sinks", err)
	}
}

// A field a sink type marks as secret must come from the environment, and
// its value is among the plan's secrets.
func TestSecretSinkField(t *testing.T) {
	type vaultConfig struct {
		Table string `yaml:"table"`
	}
	vault := SinkDescriptor{Type: "vault", Summary: "a store of secrets", NewConfig: func() any { return new(vaultConfig) }, Fields: []FieldDescriptor{
		{Name: "table", Doc: "the store's token", Secret: true, Required: "missing: the token"},
	}}
	opts := testOptions()
	opts.Sinks = SinkCatalog{vault}
	src := strings.Replace(minimalPlan, "  type: file\n  path: out/orders.jsonl\n", "  type: vault\n  table: %s\n", 1)
	_, err := Parse("plan.yaml", []byte(fmt.Sprintf(src, "s3cr3t-token")), opts)
	if want := "sink.table: a literal secret must not be written in a plan: take it from the environment, e.g. table: ${VAULT_TABLE}, and export the variable"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("literal secret: %v, want %q", err, want)
	}
	opts.LookupEnv = func(string) (string, bool) { return "s3cr3t-token", true }
	p, err := Parse("plan.yaml", []byte(fmt.Sprintf(src, "${VAULT_TOKEN}")), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Secrets(), "s3cr3t-token") {
		t.Errorf("Secrets() = %v, want the token among them", p.Secrets())
	}
}

// A catalog whose descriptors do not describe their config is refused
// when a plan is loaded, naming the type and the field.
func TestSinkCatalogMustDescribeConfig(t *testing.T) {
	type config struct {
		Bucket string `yaml:"bucket"`
		Key    string `yaml:"partition_key"`
		Extra  string `yaml:"extra"`
	}
	newConfig := func() any { return new(config) }
	fields := []FieldDescriptor{{Name: "bucket", Doc: "d"}, {Name: "partition_key", Doc: "d"}, {Name: "extra", Doc: "d"}}
	for _, tc := range []struct {
		name string
		d    SinkDescriptor
		want string
	}{
		{"described", SinkDescriptor{Type: "mem", NewConfig: newConfig, Fields: fields}, ""},
		{"a field without its descriptor", SinkDescriptor{Type: "mem", NewConfig: newConfig, Fields: fields[:2]},
			"plan: sink type mem: its config's field extra has no field descriptor"},
		{"a descriptor without its field", SinkDescriptor{Type: "mem", NewConfig: newConfig, Fields: append(slices.Clone(fields), FieldDescriptor{Name: "buckets"})},
			"plan: sink type mem: field buckets is not a yaml field of its config"},
		{"a field described twice", SinkDescriptor{Type: "mem", NewConfig: newConfig, Fields: append(slices.Clone(fields), fields[0])},
			"plan: sink type mem: field bucket is described twice"},
		{"a fingerprint key of a common field", SinkDescriptor{Type: "mem", NewConfig: newConfig,
			Fields: []FieldDescriptor{fields[0], {Name: "partition_key", Fingerprint: true}, fields[2]}},
			"plan: sink type mem: field partition_key enters the fingerprint as Key, a common field's key"},
		{"not a pointer to a struct", SinkDescriptor{Type: "mem", NewConfig: func() any { return config{} }},
			"plan: sink type mem: NewConfig returns plan.config, want a pointer to a struct"},
	} {
		opts := testOptions()
		opts.Sinks = append(slices.Clone(testSinks), tc.d)
		_, err := Parse("plan.yaml", []byte(minimalPlan), opts)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
