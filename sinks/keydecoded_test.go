package sinks_test

import (
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// A decoded key is what .Key is: its fields read like .Value's, numbers as
// written; the whole object prints as JSON with its fields sorted; the
// fast paths ({{ .Key }} alone, text and plain fields) agree with it. A
// record whose key was not decoded renders as before.
func TestKeyTemplateDecodedKey(t *testing.T) {
	decoded := keyRecord(`{"id":1}`)
	decoded.Key = []byte{0, 0, 0, 0, 5, 2}
	decoded.Note = &record.Note{Decoded: &record.Decoded{Key: []byte(`{"region":"eu","id":9007199254740993,"tag":"<a&b>"}`), KeySchemaID: 5}}
	scalar := keyRecord(`{}`)
	scalar.Note = &record.Note{Decoded: &record.Decoded{Key: []byte(`"ord-7"`), KeySchemaID: 6}}
	for _, tc := range []struct {
		template string
		r        *record.Record
		want     string
	}{
		{"{{ .Key.id }}", decoded, "9007199254740993"},
		{"{{ .Key.region }}-{{ .Value.id }}", decoded, "eu-1"},
		{"{{ .Key }}", decoded, `{"id":9007199254740993,"region":"eu","tag":"<a&b>"}`},
		{"k/{{ .Key }}", decoded, `k/{"id":9007199254740993,"region":"eu","tag":"<a&b>"}`},
		{"{{ .Key }}", scalar, "ord-7"},
		{"{{ .Key }}", keyRecord(`{}`), "k-1"},
	} {
		k, err := sinks.NewKeyer(tc.template)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Key(tc.r)
		if err != nil || got != tc.want {
			t.Errorf("%s: Key = %q, %v; want %q", tc.template, got, err, tc.want)
		}
	}
}
