package sinks

import (
	"testing"

	"github.com/replay-tool/replay/internal/record"
)

// A template that is one field ({{ .Key }}, {{ .Offset }}...) is rendered
// without text/template, and renders exactly what the executed template
// renders: the same key, the same refusal of an empty key.
func TestKeyerFieldOnlyAsExecuted(t *testing.T) {
	recs := []record.Record{
		{Topic: "orders", Partition: 3, Offset: 42, Key: []byte("k-1")},
		{Topic: "orders", Partition: 0, Offset: 0, Key: nil},
		{Topic: "orders", Partition: 11, Offset: 1 << 40, Key: []byte{}},
		{Topic: "orders", Partition: 1, Offset: 7, Key: []byte("caf\xc3\x28 <no value>")},
		{Topic: "orders", Partition: 1, Offset: 8, Key: []byte{0xff, 0x00}},
	}
	for _, f := range []string{"Key", "Topic", "Partition", "Offset"} {
		fast, err := NewKeyer("{{ ." + f + " }}")
		if err != nil {
			t.Fatal(err)
		}
		if fast.field == nil {
			t.Fatalf("{{ .%s }} is not rendered as a field", f)
		}
		slow, err := NewKeyer("{{ ." + f + " }}{{ \"\" }}")
		if err != nil || slow.field != nil {
			t.Fatalf("the comparison template is a field: %v", err)
		}
		for i := range recs {
			got, gerr := fast.Key(&recs[i])
			want, werr := slow.Key(&recs[i])
			if got != want || (gerr == nil) != (werr == nil) {
				t.Errorf("{{ .%s }} on record %d: %q, %v; executed: %q, %v", f, i, got, gerr, want, werr)
			}
		}
	}
	for _, text := range []string{"{{ .Value.id }}", "k-{{ .Key }}", "{{ .Key | printf \"%s\" }}", "{{ $x := .Key }}"} {
		if k, _ := NewKeyer(text); k != nil && k.field != nil {
			t.Errorf("%s is rendered as a single field", text)
		}
	}
}
