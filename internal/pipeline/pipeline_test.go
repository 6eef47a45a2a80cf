package pipeline

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/mapping"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

func rec(key, value string) record.Record {
	r := record.Record{Topic: "orders", Partition: 3, Offset: 1200, Headers: []record.Header{{Key: "h", Value: []byte("v")}}}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func build(t *testing.T, filterExpr, key string, typ plan.SinkType, use sinks.KeyUse) *Run {
	t.Helper()
	p, err := New(&plan.Plan{Filter: filterExpr, Sink: plan.Sink{Type: typ, Key: key}}, use)
	if err != nil {
		t.Fatal(err)
	}
	return p.Partition()
}

// Without a filter, a key template or a sink that writes keys, every stage
// is the identity: records pass as they are, and the caller may skip them.
func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, filter, key string
		use               sinks.KeyUse
		identity          bool
	}{
		{"nothing", "", "", sinks.KeysAll, true},
		{"a template, no key written", "", "{{ .Value.id }}", sinks.KeysUnused, true},
		{"the default key", "", "  ", sinks.KeysAll, true},
		{"a filter", "true", "", sinks.KeysAll, false},
		{"a template and keys written", "", "{{ .Value.id }}", sinks.KeysButTombstones, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := build(t, tc.filter, tc.key, "postgres", tc.use)
			if run.Identity() != tc.identity {
				t.Errorf("Identity = %v, want %v", run.Identity(), tc.identity)
			}
			if !tc.identity {
				return
			}
			r := rec("k", `not json`)
			want := rec("k", `not json`)
			if ok, err := run.Process(&r); !ok || err != nil || !reflect.DeepEqual(r, want) {
				t.Errorf("Process = %v, %v; record %+v, want it unchanged", ok, err, r)
			}
		})
	}
}

func TestFilterStage(t *testing.T) {
	for _, tc := range []struct {
		expr, value string
		pass        bool
		fails       bool
	}{
		{`value.status == "paid"`, `{"status":"paid"}`, true, false},
		{`value.status == "paid"`, `{"status":"created"}`, false, false},
		{`value.status == "paid"`, `not json`, false, true},
		{`key == "k" && headers.h == "v" && partition == 3`, ``, true, false},
		{`value == nil`, ``, true, false},
	} {
		t.Run(tc.expr+" on "+tc.value, func(t *testing.T) {
			run := build(t, tc.expr, "", "file", sinks.KeysUnused)
			r := rec("k", tc.value)
			ok, err := run.Process(&r)
			var re *record.Error
			var fe *filter.EvalError
			if tc.fails {
				if !errors.As(err, &re) || re.Offset != 1200 || !errors.As(err, &fe) {
					t.Fatalf("Process = %v, %v; want a *record.Error wrapping a *filter.EvalError", ok, err)
				}
				return
			}
			if ok != tc.pass || err != nil {
				t.Errorf("Process = %v, %v; want %v", ok, err, tc.pass)
			}
		})
	}
}

func TestKeyStage(t *testing.T) {
	for _, tc := range []struct {
		name, template string
		typ            plan.SinkType
		use            sinks.KeyUse
		key, value     string
		want           string // IdemKey; "" is the default key
		err            error  // in the chain of the error, nil for none
		message        string // in the error's text
	}{
		{name: "value field", template: "{{ .Value.id }}", use: sinks.KeysAll, value: `{"id":42}`, want: "42"},
		{name: "full template", template: `{{ .Value.id }}-{{ index .Headers "h" }}`, use: sinks.KeysAll, value: `{"id":"a"}`, want: "a-v"},
		{name: "record key", template: "{{ .Key }}", use: sinks.KeysAll, key: "k-1", want: "k-1"},
		{name: "default key", template: "", use: sinks.KeysAll, value: `{"id":42}`, want: ""},
		{name: "no key written", template: "{{ .Value.id }}", use: sinks.KeysUnused, value: `not json`, want: ""},
		{name: "tombstone skipped", template: "{{ .Value.id }}", use: sinks.KeysButTombstones, want: ""},
		{name: "tombstone written", template: "{{ .Value.id }}", use: sinks.KeysAll, err: sinks.ErrKeyTemplate},
		{name: "missing field", template: "{{ .Value.id }}", use: sinks.KeysButTombstones, value: `{"x":1}`, err: sinks.ErrKeyTemplate},
		{name: "null field", template: "order-{{ .Value.id }}", use: sinks.KeysAll, value: `{"id":null}`, err: sinks.ErrEmptyKey},
		{name: "kafka, null key", template: "{{ .Key }}", typ: "kafka", use: sinks.KeysAll, value: `{}`, err: sinks.ErrEmptyKey,
			message: "drop key: to keep each record's own key"},
		{name: "kafka, empty key", template: "{{ .Key }}", typ: "kafka", use: sinks.KeysAll, key: "", value: `{}`, err: sinks.ErrEmptyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ := tc.typ
			if typ == "" {
				typ = "postgres"
			}
			run := build(t, "", tc.template, typ, tc.use)
			r := rec(tc.key, tc.value)
			if tc.name == "kafka, empty key" {
				r.Key = []byte{}
			}
			ok, err := run.Process(&r)
			if tc.err == nil {
				if !ok || err != nil || r.IdemKey != tc.want {
					t.Errorf("Process = %v, %v; IdemKey %q, want %q", ok, err, r.IdemKey, tc.want)
				}
				return
			}
			var re *record.Error
			if !errors.As(err, &re) || re.Offset != 1200 || !errors.Is(err, tc.err) || r.IdemKey != "" {
				t.Fatalf("Process = %v, %v; IdemKey %q; want a *record.Error that is %v", ok, err, r.IdemKey, tc.err)
			}
			if strings.Contains(err.Error(), "drop key:") != (tc.message != "") || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q, want it to say %q", err, tc.message)
			}
		})
	}
}

// A key template that does not compile is an error naming the sink key.
func TestNewKeyCompileError(t *testing.T) {
	if _, err := New(&plan.Plan{Sink: plan.Sink{Type: "postgres", Key: "{{ .Value.id "}}, sinks.KeysAll); err == nil || !strings.HasPrefix(err.Error(), "sink key: ") {
		t.Errorf("New = %v, want a sink key error", err)
	}
	if _, err := New(&plan.Plan{Filter: "value.", Sink: plan.Sink{Type: "file"}}, sinks.KeysUnused); err == nil || !strings.HasPrefix(err.Error(), "filter: ") {
		t.Errorf("New = %v, want a filter error", err)
	}
}

// What a stage outputs is what the stages after it and the sink see:
// a decode stage's value reaches the filter, the mapping and the key; a
// mapping stage's value reaches the key; the record Process leaves is the
// one the sink is given.
func TestStagesSeeEachOthersOutput(t *testing.T) {
	p, err := New(&plan.Plan{Filter: `value.status == "paid"`, Sink: plan.Sink{Type: "postgres", Key: "{{ .Value.id }}"}}, sinks.KeysAll)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	// decode: "id;status" to a JSON object.
	p.decode = func(r *record.Record) error {
		order = append(order, "decode")
		id, status, ok := bytes.Cut(r.Value, []byte(";"))
		if !ok {
			return record.NewError(r, errors.New("decode: no ';'"))
		}
		r.Value = []byte(`{"id":"` + string(id) + `","status":"` + string(status) + `"}`)
		return nil
	}
	// mapping: set id to "m-<id>"; the value the filter may have parsed is
	// stale then.
	p.mapping = func(r *record.Record) error {
		order = append(order, "mapping")
		r.Value = bytes.Replace(r.Value, []byte(`"id":"`), []byte(`"id":"m-`), 1)
		if r.Note != nil {
			r.Note.Parsed = false
		}
		return nil
	}
	run := p.Partition()
	if run.Identity() {
		t.Fatal("a pipeline with stages is the identity")
	}
	r := rec("k", "7;paid")
	if ok, err := run.Process(&r); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if string(r.Value) != `{"id":"m-7","status":"paid"}` || r.IdemKey != "m-7" || strings.Join(order, ",") != "decode,mapping" {
		t.Errorf("the sink gets value %s, key %q after %v; want the mapped value and key", r.Value, r.IdemKey, order)
	}

	order = nil
	dropped := rec("k", "8;created")
	if ok, err := run.Process(&dropped); ok || err != nil || strings.Join(order, ",") != "decode" || dropped.IdemKey != "" {
		t.Errorf("a record the filter leaves out: Process = %v, %v after %v, key %q", ok, err, order, dropped.IdemKey)
	}
	order = nil
	bad := rec("k", "garbage")
	if ok, err := run.Process(&bad); ok || err == nil || !strings.Contains(err.Error(), "decode: no ';'") || strings.Join(order, ",") != "decode" {
		t.Errorf("a record decode fails on: Process = %v, %v after %v", ok, err, order)
	}
}

// BenchmarkProcess runs the pipeline of a sink that writes every record's
// key over the benchmark's order events: the default key (nothing to
// render: no allocation), a template of a value field, and a filter.
func BenchmarkProcess(b *testing.B) {
	value := []byte(`{"id":"ord-123456","customer":"cus-01234","status":"paid","amount":123.45,"currency":"EUR","items":3,` +
		`"created_at":"2026-11-30T10:00:00.123Z","channel":"web","shipping":{"country":"DE","city":"Berlin","zip":"10123"},"fx_rate":1.234567,"note":"replay demo order"}`)
	for _, c := range []struct{ name, filter, key string }{
		{"default key", "", ""},
		{"key template", "", "{{ .Value.id }}"},
		{"filter and key template", `value.status == "paid"`, "{{ .Value.id }}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := New(&plan.Plan{Filter: c.filter, Sink: plan.Sink{Type: "postgres", Key: c.key}}, sinks.KeysAll)
			if err != nil {
				b.Fatal(err)
			}
			run := p.Partition()
			recs, key := make([]record.Record, 1), []byte("ord-123456")
			b.ReportAllocs()
			for b.Loop() {
				recs[0] = record.Record{Topic: "orders", Partition: 3, Offset: 1200, Key: key, Value: value}
				if !run.Identity() {
					if ok, err := run.Process(&recs[0]); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			}
		})
	}
}

// The pipeline of a sink that writes the default key allocates nothing per
// record: the key stage renders nothing, the sink appends the coordinates.
func TestDefaultKeyAllocatesNothing(t *testing.T) {
	run := build(t, "", "", "kafka", sinks.KeysAll)
	recs := []record.Record{rec("k", `{"id":1}`)}
	if n := testing.AllocsPerRun(100, func() {
		if ok, err := run.Process(&recs[0]); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n != 0 || recs[0].IdemKey != "" {
		t.Errorf("Process allocates %v times, key %q", n, recs[0].IdemKey)
	}
}

// mappedPlan is a validated plan with the mapping m and the sink key.
func mappedPlan(t *testing.T, m, key string) *plan.Plan {
	t.Helper()
	src := "version: 1\nname: m\nsource: {brokers: [\"k:9092\"], topic: orders}\ngroup: replay.m\nwindow: {from: 2026-11-01T00:00:00Z, to: 2026-11-02T00:00:00Z}\n" +
		"sink: {type: file, path: out/m.jsonl, key: '" + key + "'}\nmapping:\n" + m
	p, err := plan.Parse("plan.yaml", []byte(src), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The mapping runs after the filter and before the key template, which
// reads the mapped value; the value becomes the mapped JSON and the bytes
// as read stay with the record.
func TestMappingStage(t *testing.T) {
	p := mappedPlan(t, "  - rename: {cust: customer.id}\n  - set: {total: 'value.price * value.qty'}\n  - drop: [debug]\n", "{{ .Value.customer.id }}-{{ .Value.total }}")
	p.Filter = `value.qty > 0`
	pl, err := New(p, sinks.KeysAll)
	if err != nil {
		t.Fatal(err)
	}
	run := pl.Partition()
	if run.Identity() {
		t.Fatal("a mapping is not the identity")
	}
	in := `{"cust":"c7","price":19.99,"qty":3,"debug":{"trace":1}}`
	r := rec("k", in)
	ok, err := run.Process(&r)
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if want := `{"price":19.99,"qty":3,"customer":{"id":"c7"},"total":59.97}`; string(r.Value) != want {
		t.Errorf("value %s, want %s", r.Value, want)
	}
	if string(r.OriginalValue()) != in || !r.Mapped() {
		t.Errorf("original %s (mapped %v), want %s", r.OriginalValue(), r.Mapped(), in)
	}
	if r.IdemKey != "c7-59.97" {
		t.Errorf("key %q, want c7-59.97 (from the mapped value)", r.IdemKey)
	}

	left := rec("k", `{"qty":0}`)
	if ok, err := run.Process(&left); ok || err != nil || left.Mapped() {
		t.Errorf("a record the filter leaves out: %v, %v, mapped %v", ok, err, left.Mapped())
	}
	bad := rec("k", `{"cust":"c8","price":10,"qty":9223372036854775807}`)
	_, err = run.Process(&bad)
	var se *mapping.StepError
	var re *record.Error
	if !errors.As(err, &se) || !errors.As(err, &re) || se.Step != 2 {
		t.Fatalf("an overflow: %v, want the record's error naming step 2", err)
	}
	if want := "record orders/3@1200: mapping step 2 (set value.total): value.price (10) * value.qty (9223372036854775807) overflows a 64-bit integer"; err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
}
