package plan

import (
	"strings"
	"testing"
)

// Under decode.key the filter's key and the key template's .Key are the
// decoded key, with fields (key.id, .Key.id); without it they stay the
// key's bytes as a string, and a field of them is refused as before.
func TestDecodedKeyFields(t *testing.T) {
	const body = `version: 1
name: orders-fix
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-fix
window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T12:00:00Z}
filter: key.region == "eu"
sink: {type: postgres, dsn: "postgres://localhost/test", table: orders, key: "{{ .Key.id }}"}
`
	const decodeKey = "decode: {key: avro, schema_registry: {url: https://sr-1:8081}}\n"
	p, err := Parse("p.yaml", []byte(body+decodeKey), testOptions())
	if err != nil {
		t.Fatalf("decode.key: %v", err)
	}
	if prog, err := p.FilterProgram(); err != nil || prog == nil {
		t.Fatalf("decode.key: filter %v, %v", prog, err)
	}
	_, err = Parse("p.yaml", []byte(body), testOptions())
	if err == nil {
		t.Fatal("without decode.key, key.region and .Key.id were accepted")
	}
	for _, want := range []string{"filter", ".Key.id: .Key is a plain value without fields"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("without decode.key: error %q lacks %q", err, want)
		}
	}
}
