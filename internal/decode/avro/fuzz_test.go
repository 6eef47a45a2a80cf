package avro

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// fuzzSchema has a field of every type and logical type, and recursion.
const fuzzSchema = `{"type":"record","name":"F","fields":[
 {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
 {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"by","type":"bytes"},
 {"name":"s","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
 {"name":"x","type":{"type":"fixed","name":"X","size":3}},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":4}},
 {"name":"date","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"tn","type":{"type":"long","logicalType":"local-timestamp-nanos"}},
 {"name":"a","type":{"type":"array","items":["null","long","F"]}},
 {"name":"m","type":{"type":"map","values":{"type":"array","items":"null"}}},
 {"name":"u","type":["null","string","F"]}]}`

// Random bytes never panic nor hang: they decode to valid JSON (valid
// UTF-8 with U+2028 and U+2029 escaped: the decoded value is written as it
// is) or fail with an error.
func FuzzAppendJSON(f *testing.F) {
	s, _, err := Parse(fuzzSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', 2, 'x', 2, 1, 2, 3, 2, 5, 2, 4, 6, 8, 2, 2, 3, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, opts := range []Options{{}, {TaggedUnions: true}} {
			out, err := AppendJSON(nil, s, payload, opts)
			if err == nil && !json.Valid(out) {
				t.Fatalf("decoded %x to invalid JSON %s", payload, out)
			}
			if err == nil && (!utf8.Valid(out) || bytes.Contains(out, []byte("\u2028")) || bytes.Contains(out, []byte("\u2029"))) {
				t.Fatalf("decoded %x to JSON that is not clean: %q", payload, out)
			}
		}
	})
}
