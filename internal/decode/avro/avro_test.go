package avro

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func long(v int64) []byte { return binary.AppendVarint(nil, v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func decodeOne(t *testing.T, schema string, payload []byte, opts Options) (string, error) {
	t.Helper()
	s, _, err := Parse(schema, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", schema, err)
	}
	out, err := AppendJSON(nil, s, payload, opts)
	return string(out), err
}

// Each type and logical type renders as the rendering table says.
func TestRendering(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		payload      []byte
		want         string
	}{
		{"long max", `"long"`, long(math.MaxInt64), `9223372036854775807`},
		{"long min", `"long"`, long(math.MinInt64), `-9223372036854775808`},
		{"float", `"float"`, binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.1)), `0.1`},
		{"double NaN", `"double"`, binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())), `"NaN"`},
		{"double -Inf", `"double"`, binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Inf(-1))), `"-Infinity"`},
		{"double small", `"double"`, binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e-7)), `1e-7`},
		{"bytes empty", `"bytes"`, long(0), `""`},
		{"decimal 12.30", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, cat(long(2), []byte{0x04, 0xce}), `12.30`},
		{"decimal -0.05", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, cat(long(1), []byte{0xfb}), `-0.05`},
		{"decimal empty is 0", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`, long(0), `0.00`},
		{"decimal fixed", `{"type":"fixed","name":"F","size":2,"logicalType":"decimal","precision":4,"scale":1}`, []byte{0xff, 0x85}, `-12.3`},
		{"decimal scale > precision is bytes", `{"type":"bytes","logicalType":"decimal","precision":2,"scale":3}`, cat(long(1), []byte{5}), `"BQ=="`},
		{"decimal no precision is bytes", `{"type":"bytes","logicalType":"decimal","scale":1}`, cat(long(1), []byte{5}), `"BQ=="`},
		{"decimal fixed too small for precision is fixed", `{"type":"fixed","name":"F","size":1,"logicalType":"decimal","precision":3}`, []byte{5}, `"BQ=="`},
		{"date on a string is a string", `{"type":"string","logicalType":"date"}`, cat(long(1), []byte("x")), `"x"`},
		{"unknown logical type", `{"type":"long","logicalType":"distance-mm"}`, long(7), `7`},
		{"uuid", `{"type":"string","logicalType":"uuid"}`, cat(long(36), []byte("0a6f1a3e-8f4b-4c71-9f3e-2b1d9f1e6a55")), `"0a6f1a3e-8f4b-4c71-9f3e-2b1d9f1e6a55"`},
		{"uuid fixed", `{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}`, []byte{0x0a, 0x6f, 0x1a, 0x3e, 0x8f, 0x4b, 0x4c, 0x71, 0x9f, 0x3e, 0x2b, 0x1d, 0x9f, 0x1e, 0x6a, 0x55}, `"0a6f1a3e-8f4b-4c71-9f3e-2b1d9f1e6a55"`},
		{"date before 1970", `{"type":"int","logicalType":"date"}`, long(-1), `"1969-12-31"`},
		{"time-millis", `{"type":"int","logicalType":"time-millis"}`, long(45296789), `"12:34:56.789"`},
		{"time-micros", `{"type":"long","logicalType":"time-micros"}`, long(45296789012), `"12:34:56.789012"`},
		{"timestamp-millis before 1970", `{"type":"long","logicalType":"timestamp-millis"}`, long(-1), `"1969-12-31T23:59:59.999Z"`},
		{"timestamp-micros", `{"type":"long","logicalType":"timestamp-micros"}`, long(1_700_000_000_123_456), `"2023-11-14T22:13:20.123456Z"`},
		{"timestamp-nanos", `{"type":"long","logicalType":"timestamp-nanos"}`, long(-1), `"1969-12-31T23:59:59.999999999Z"`},
		{"local-timestamp-millis", `{"type":"long","logicalType":"local-timestamp-millis"}`, long(0), `"1970-01-01T00:00:00.000"`},
		{"timestamp-millis far future", `{"type":"long","logicalType":"timestamp-millis"}`, long(math.MaxInt64), `"292278994-08-17T07:12:55.807Z"`},
		{"timestamp-millis far past", `{"type":"long","logicalType":"timestamp-millis"}`, long(-62198755200000), `"-0001-01-01T00:00:00.000Z"`},
		{"enum by the writer's symbol", `{"type":"enum","name":"E","symbols":["a","b","c"]}`, long(2), `"c"`},
		{"map", `{"type":"map","values":"int"}`, cat(long(1), long(1), []byte("k"), long(-3), long(0)), `{"k":-3}`},
		{"array in a negative-count block", `{"type":"array","items":"int"}`, cat(long(-2), long(2), long(1), long(2), long(0)), `[1,2]`},
		{"string escapes", `"string"`, cat(long(7), []byte("a\"\n\u2028\x01")), `"a\"\n\u2028\u0001"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeOne(t, tc.schema, tc.payload, Options{})
			if err != nil || got != tc.want {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// Bare unions render the branch's value; tagged ones name the branch as
// Avro's JSON encoding does; null is null either way.
func TestUnions(t *testing.T) {
	schema := `["null","long",{"type":"record","name":"R","namespace":"n","fields":[]},{"type":"long","logicalType":"timestamp-millis"}]`
	for _, tc := range []struct {
		payload      []byte
		bare, tagged string
	}{
		{long(0), `null`, `null`},
		{cat(long(1), long(5)), `5`, `{"long":5}`},
		{long(2), `{}`, `{"n.R":{}}`},
		{cat(long(3), long(0)), `"1970-01-01T00:00:00.000Z"`, `{"long":"1970-01-01T00:00:00.000Z"}`},
	} {
		for _, tagged := range []bool{false, true} {
			got, err := decodeOne(t, schema, tc.payload, Options{TaggedUnions: tagged})
			want := tc.bare
			if tagged {
				want = tc.tagged
			}
			if err != nil || got != want {
				t.Errorf("%x tagged=%v: got %s, %v; want %s", tc.payload, tagged, got, err, want)
			}
		}
	}
	_, warnings, _ := Parse(`{"type":"record","name":"X","fields":[{"name":"u","type":["int","long"]},{"name":"v","type":["null","string"]}]}`, nil)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "union at value.u: branches int and long") {
		t.Fatalf("warnings %q, want one on u", warnings)
	}
}

// Payloads that do not decode say why.
func TestDecodeErrors(t *testing.T) {
	rec := `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"long"}}]}`
	recursive := `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`
	for _, tc := range []struct {
		name, schema string
		payload      []byte
		want         string
	}{
		{"left over", `"int"`, []byte{2, 0}, "1 bytes left over"},
		{"truncated", `"long"`, []byte{0x80}, "truncated"},
		{"varint overflow", `"long"`, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "overflows"},
		{"int out of range", `"int"`, long(1 << 40), "out of the 32-bit range"},
		{"boolean 2", `"boolean"`, []byte{2}, "neither 0 nor 1"},
		{"negative length", `"bytes"`, long(-1), "negative length"},
		{"length past the end", `"string"`, long(100), "longer than the 0 bytes left"},
		{"invalid UTF-8", `"string"`, cat(long(1), []byte{0xff}), "not valid UTF-8"},
		{"enum index", `{"type":"enum","name":"E","symbols":["a"]}`, long(1), "index 1 is outside its 1 symbols"},
		{"union index", `["null","int"]`, long(2), "union branch 2 is outside its 2 branches"},
		{"array too long", rec, long(1 << 40), "at a: array block of 1099511627776 items"},
		{"array item path", rec, cat(long(2), long(1), []byte{0x80}), "at a[1]: payload ends"},
		{"zero-size items", `{"type":"array","items":"null"}`, long(1 << 40), "no bytes"},
		{"time-millis outside a day", `{"type":"int","logicalType":"time-millis"}`, long(-1), "outside a day"},
		{"too deep", recursive, cat(func() []byte {
			b := make([]byte, 3000)
			for i := range b {
				b[i] = 2
			}
			return b
		}(), long(0)), "deeper than 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeOne(t, tc.schema, tc.payload, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %s, %v; want an error with %q", got, err, tc.want)
			}
		})
	}
}

// Schemas that are not Avro say why.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"record","name":"R","fields":[{"name":"a","type":"Missing"}]}`, `unknown type "Missing"`},
		{`[1]`, "union branch 0: a type is a name, a list (union) or an object, not a number"},
		{`["int",["long"]]`, "unions may not nest"},
		{`{"type":"enum","name":"E"}`, "needs a list of symbols"},
		{`{"type":"fixed","name":"F"}`, "needs a size"},
		{`{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"enum","name":"R","symbols":["x"]}}]}`, "defined twice"},
		{`{"type":`, "not JSON"},
	} {
		if _, _, err := Parse(tc.schema, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.schema, err, tc.want)
		}
	}
}

// BenchmarkAppendJSON decodes a record of a long, a timestamp, a local
// timestamp, an array of longs and a map of strings.
func BenchmarkAppendJSON(b *testing.B) {
	s, _, err := Parse(`{"type":"record","name":"R","fields":[{"name":"id","type":"long"},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
		{"name":"xs","type":{"type":"array","items":"long"}},
		{"name":"m","type":{"type":"map","values":"string"}}]}`, nil)
	if err != nil {
		b.Fatal(err)
	}
	str := func(v string) []byte { return append(long(int64(len(v))), v...) }
	payload := cat(long(123456789), long(1_700_000_000_123_456), long(1_700_000_000_123),
		long(4), long(1), long(-2), long(3), long(40000), long(0),
		long(2), str("alpha"), str("one"), str("beta"), str("two"), long(0))
	if _, err := AppendJSON(nil, s, payload, Options{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for range b.N {
		if _, err := AppendJSON(buf[:0], s, payload, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
