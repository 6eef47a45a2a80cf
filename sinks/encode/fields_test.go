package encode_test

import (
	"strings"
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// Under decode.value, a sink's value_format applies to no value (each is
// written decoded, as JSON), and a dead letter's text or json cannot hold
// the framed bytes of a record that failed to decode: both are warned of,
// in each sink that has the field; auto, base64 and plans without decode
// are not.
func TestDecodedValueFormatWarnings(t *testing.T) {
	base := "version: 1\nname: p\nsource: {brokers: [\"kafka-1:9092\"], topic: orders}\ngroup: replay.p\n" +
		"window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T12:00:00Z}\n"
	dec := "decode: {value: schema_registry, schema_registry: {url: https://sr-1:8081}}\n"
	dl := "on_error: dead_letter\n"
	cases := []struct{ src, want string }{
		{dec + "sink: {type: file, path: out.jsonl, value_format: base64}\n", "sink.value_format: base64 applies to no value under decode.value"},
		{dec + "sink: {type: stdout, value_format: text}\n", "sink.value_format: text applies to no value under decode.value"},
		{dec + "sink: {type: http, url: https://h/x, value_format: json}\n", "sink.value_format: json applies to no value under decode.value"},
		{dec + dl + "dead_letter: {type: file, path: dead.jsonl, value_format: text}\nsink: {type: file, path: out.jsonl}\n", "dead_letter.value_format: text: a record that fails to decode keeps its framed bytes"},
		{dec + dl + "dead_letter: {type: file, path: dead.jsonl, value_format: base64}\nsink: {type: file, path: out.jsonl, value_format: auto}\n", ""},
		{"sink: {type: file, path: out.jsonl, value_format: text}\n", ""},
	}
	for _, c := range cases {
		p, err := plan.Parse("p.yaml", []byte(base+c.src), plan.LoadOptions{Sinks: registry.Catalog()})
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		var got []string
		for _, w := range p.Warnings() {
			if strings.Contains(w.Field, "value_format") {
				got = append(got, w.Field+": "+w.Message)
			}
		}
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: warned %q", c.src, got)
		case c.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.want)):
			t.Errorf("%s: warnings %q, want %q", c.src, got, c.want)
		}
	}
}
