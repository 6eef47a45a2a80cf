package sinks

import (
	"errors"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// slowKey renders the template the way every template is rendered without
// the fast path: on the decoded value.
func slowKey(t testing.TB, k *Keyer, r *record.Record) (string, error) {
	t.Helper()
	slow := *k
	slow.fast = nil
	return slow.Key(r)
}

var keyFastTemplates = []string{
	"{{ .Value.id }}",
	"{{ .Value.customer.id }}",
	"order-{{ .Value.id }}/{{ .Key }}@{{ .Partition }}:{{ .Offset }} {{ .Topic }}",
	"{{ .Value.a.b.c }}",
	"{{- .Value.id -}}",
}

var keyFastValues = []string{
	`{"id":42}`, `{"id":"abc"}`, `{"id":12345678901234567890123}`, `{"id":1e400}`, `{"id":-0.0}`, `{"id":1.50}`,
	`{"id":true}`, `{"id":false}`, `{"id":null}`, `{"id":""}`, `{"x":1}`, `{}`, `[]`, `"id"`, `42`, `null`, ``, `not json`,
	`{"id":1,"id":2}`, `{"id":"a","id":null}`, `{"id":{"x":1}}`, `{"id":[1,2]}`, `{"id":"caf\u00e9"}`, `{"id":"café"}`,
	`{"id":"\ud800"}`, "{\"id\":\"\xff\"}", `{"i\u0064":7}`, `{"id":7,"i\u0064":8}`, `{"customer":{"id":7,"id":"x"}}`,
	`{"customer":"flat"}`, `{"customer":null}`, `{"customer":{"id":null}}`, `{"a":{"b":{"c":"deep"}}}`, `{"a":{"b":[1]}}`,
	`{"id":1} trailing`, `{"id":1}{"id":2}`, ` {"id" : 9 } `, `{"id":"<no value>"}`, `{"id":"a\tb"}`, `{"id":"a\"b"}`,
	`{"x":{"id":1}}`, `{"idx":1,"id":2}`, `{"id2":1}`, `{"x":"id","id":3}`, `{"a":{"b":{"c":1},"c":2}}`, `{"customer":{"x":{"id":1}},"id":5}`,
}

// The fast path gives exactly the key (or the kind of error) of the full
// decode, for every template it handles.
func TestKeyFastPathMatchesDecode(t *testing.T) {
	for _, tmpl := range keyFastTemplates {
		k, err := NewKeyer(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if k.fast == nil {
			t.Fatalf("%q: no fast path", tmpl)
		}
		for _, v := range keyFastValues {
			compareKeys(t, k, v)
		}
	}
}

func compareKeys(t *testing.T, k *Keyer, value string) {
	t.Helper()
	r := &record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: time.Unix(1, 0), Key: []byte("k-1")}
	if value != "" {
		r.Value = []byte(value)
	}
	want, werr := slowKey(t, k, r)
	got, gerr := k.Key(r)
	if got != want || (gerr == nil) != (werr == nil) || errors.Is(gerr, ErrEmptyKey) != errors.Is(werr, ErrEmptyKey) ||
		(gerr != nil && gerr.Error() != werr.Error()) {
		t.Errorf("%s on %q: fast %q, %v; decode %q, %v", k.tmpl.Root, value, got, gerr, want, werr)
	}
}

func TestKeyFastPathOnlyForPlainFields(t *testing.T) {
	for _, tmpl := range []string{"{{ .Value }}", "{{ .Headers.h }}", "{{ .Timestamp }}", `{{ printf "%s" .Value.id }}`,
		"{{ .Value.id | len }}", "{{ if .Value.id }}x{{ end }}", "{{ $x := .Value.id }}{{ $x }}", `{{ index .Value "id" }}`} {
		k, err := NewKeyer(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if k.fast != nil {
			t.Errorf("%q: fast path taken for a template that needs text/template", tmpl)
		}
	}
}

func FuzzKeyFastPath(f *testing.F) {
	for i, v := range keyFastValues {
		f.Add(i%len(keyFastTemplates), v)
	}
	f.Fuzz(func(t *testing.T, i int, value string) {
		if i < 0 {
			i = -i
		}
		k, err := NewKeyer(keyFastTemplates[i%len(keyFastTemplates)])
		if err != nil {
			t.Fatal(err)
		}
		compareKeys(t, k, value)
	})
}

// BenchmarkKeyer compares the fast path with the full decode on the
// benchmark's order events.
func BenchmarkKeyer(b *testing.B) {
	value := []byte(`{"id":"ord-123456","customer":"cus-01234","status":"paid","amount":123.45,"currency":"EUR","items":3,` +
		`"created_at":"2026-11-30T10:00:00.123Z","channel":"web","shipping":{"country":"DE","city":"Berlin","zip":"10123"},"fx_rate":1.234567,"note":"replay demo order"}`)
	r := &record.Record{Topic: "orders", Partition: 3, Offset: 1200, Key: []byte("ord-123456"), Value: value}
	for _, tmpl := range []string{"{{ .Value.id }}", "{{ .Value.shipping.zip }}", "{{ .Key }}"} {
		k, err := NewKeyer(tmpl)
		if err != nil {
			b.Fatal(err)
		}
		slow := *k
		slow.fast = nil
		for _, c := range []struct {
			name string
			k    *Keyer
		}{{"fast", k}, {"decode", &slow}} {
			b.Run(tmpl+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.k.Key(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
