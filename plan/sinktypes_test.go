package plan

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The descriptors describe the Sink struct: every yaml field of Sink has a
// field descriptor and every field descriptor a yaml field, each with a
// doc; every type a field names is a sink type; every required field is
// one of the type's fields.
func TestSinkDescriptorsMatchSink(t *testing.T) {
	var yamlFields []string
	st := reflect.TypeFor[Sink]()
	for i := 0; i < st.NumField(); i++ {
		if name := strings.Split(st.Field(i).Tag.Get("yaml"), ",")[0]; name != "" && name != "-" {
			yamlFields = append(yamlFields, name)
		}
	}
	var described []string
	for _, f := range SinkFields() {
		described = append(described, f.Name)
		if f.Doc == "" {
			t.Errorf("sink field %s has no doc", f.Name)
		}
		for _, typ := range f.Types {
			if _, ok := LookupSinkType(typ); !ok {
				t.Errorf("sink field %s names %q, which is not a sink type", f.Name, typ)
			}
		}
	}
	if !slices.Equal(sorted(yamlFields), sorted(described)) {
		t.Errorf("Sink's yaml fields %v, the field descriptors %v", sorted(yamlFields), sorted(described))
	}
	for _, d := range SinkTypes() {
		if d.Summary == "" {
			t.Errorf("%s: no summary", d.Type)
		}
		for _, r := range d.Required {
			if !slices.Contains(d.Fields, r) {
				t.Errorf("%s requires %s, which is not one of its fields %v", d.Type, r, d.Fields)
			}
			if d.missing[r] == "" {
				t.Errorf("%s requires %s, but has no message for it missing", d.Type, r)
			}
		}
	}
}

// Every constant has a descriptor, in the order messages list the types.
func TestSinkTypesOrder(t *testing.T) {
	var got []SinkType
	for _, d := range SinkTypes() {
		got = append(got, d.Type)
	}
	want := []SinkType{SinkFile, SinkPostgres, SinkSQLite, SinkKafka, SinkHTTP, SinkStdout}
	if !slices.Equal(got, want) {
		t.Errorf("SinkTypes() = %v, want %v", got, want)
	}
	if _, ok := LookupSinkType("mysql"); ok {
		t.Error(`LookupSinkType("mysql") found a descriptor`)
	}
	if shared := SharedSinkTypes(); !slices.Equal(shared, []SinkType{SinkPostgres, SinkKafka, SinkHTTP}) {
		t.Errorf("SharedSinkTypes() = %v, want postgres, kafka, http", shared)
	}
}

// The accessors return copies: changing one does not change the next.
func TestSinkDescriptorsAreCopies(t *testing.T) {
	d, _ := LookupSinkType(SinkPostgres)
	d.Required[0], d.Fields[0] = "changed", "changed"
	SinkTypes()[0].Required[0] = "changed"
	SinkFields()[3].Types[0] = "changed"
	again, _ := LookupSinkType(SinkPostgres)
	if again.Required[0] != "dsn" || again.Fields[0] != "dsn" || SinkTypes()[0].Required[0] != "path" || SinkFields()[3].Types[0] != SinkFile {
		t.Error("a descriptor changed through a returned copy")
	}
}

// A sink that gives only its type is told about each field its descriptor
// requires, at the sink.
func TestSinkRequiredFields(t *testing.T) {
	for _, d := range SinkTypes() {
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
		if !slices.Equal(missing, d.Required) {
			t.Errorf("%s sink without fields: missing %v, want %v (%v)", d.Type, missing, d.Required, err)
		}
	}
}
