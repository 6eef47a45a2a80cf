package encode_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// checkLine checks that line is r as one JSONL line: a single JSON object
// of valid UTF-8 ending in its only newline, with no raw U+2028/U+2029 (line
// separators to some readers), that DecodeJSONL reads back to r's exact
// bytes (key, value, headers, nil kept apart from empty) and coordinates.
func checkLine(t testing.TB, line []byte, r *record.Record) {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 || bytes.IndexByte(line, '\r') >= 0 {
		t.Fatalf("not one line ending in a newline: %q", line)
	}
	if !utf8.Valid(line) {
		t.Fatalf("not valid UTF-8: %q", line)
	}
	if bytes.ContainsRune(line, '\u2028') || bytes.ContainsRune(line, '\u2029') {
		t.Fatalf("raw U+2028/U+2029: %q", line)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		t.Fatalf("not a JSON object: %v: %q", err, line)
	}
	got, err := encode.DecodeJSONL(line)
	if err != nil {
		t.Fatalf("decode: %v: %q", err, line)
	}
	sameBytes(t, "key", got.Key, r.Key)
	sameBytes(t, "value", got.Value, r.Value)
	if len(got.Headers) != len(r.Headers) {
		t.Fatalf("%d headers, want %d: %q", len(got.Headers), len(r.Headers), line)
	}
	for i, h := range r.Headers {
		sameBytes(t, "header key", []byte(got.Headers[i].Key), []byte(h.Key))
		sameBytes(t, "header value", got.Headers[i].Value, h.Value)
	}
	if utf8.ValidString(r.Topic) && got.Topic != r.Topic || got.Partition != r.Partition || got.Offset != r.Offset {
		t.Fatalf("coordinates %s/%d@%d, want %s/%d@%d", got.Topic, got.Partition, got.Offset, r.Topic, r.Partition, r.Offset)
	}
	if y := r.Time.UTC().Year(); y >= 0 && y <= 9999 && got.Time.UnixMilli() != r.Time.UnixMilli() {
		t.Fatalf("timestamp %v, want %v", got.Time, r.Time)
	}
}

// sameBytes fails t unless got is want byte for byte, nil and empty apart.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%s reads back as %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

var ts = time.Date(2026, 11, 3, 10, 0, 0, 123_000_000, time.UTC)

func TestAppendJSONLHostileInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  record.Record
	}{
		{"plain JSON value", record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: ts, Key: []byte("k-1"), Value: []byte(`{"id":1}`)}},
		{"nil key and value", record.Record{Topic: "orders", Time: ts}},
		{"empty key and value", record.Record{Topic: "orders", Time: ts, Key: []byte{}, Value: []byte{}}},
		{"invalid UTF-8 everywhere", record.Record{Topic: "or\xffders", Time: ts, Key: []byte("\xff\xfe"), Value: []byte("\xc3\x28 text \xed\xa0\x80"),
			Headers: []record.Header{{Key: "h\xff", Value: []byte("\x80")}}}},
		{"invalid UTF-8 inside a JSON value", record.Record{Topic: "orders", Time: ts, Value: []byte("{\"s\":\"a\xffb\",\"t\":[\"\xc0\"]}")}},
		{"control characters", record.Record{Topic: "orders", Time: ts, Key: []byte("\x00\x01\x1f\x7f"), Value: []byte("a\tb\x00c\x1bd\x08\x0c")}},
		{"JSON across lines", record.Record{Topic: "orders", Time: ts, Value: []byte("{\n  \"a\": 1\n}")}},
		{"JSON across lines with CR", record.Record{Topic: "orders", Time: ts, Value: []byte("{\"a\":\r1}")}},
		{"JSON then a trailing newline", record.Record{Topic: "orders", Time: ts, Value: []byte("{\"a\":1}\n")}},
		{"U+2028 and U+2029 in text", record.Record{Topic: "orders", Time: ts, Key: []byte("k\u2028"), Value: []byte("a\u2028b\u2029c")}},
		{"U+2028 inside a JSON value", record.Record{Topic: "orders", Time: ts, Value: []byte("{\"s\":\"a\u2028b\u2029\"}")}},
		{"JSON with surrounding spaces", record.Record{Topic: "orders", Time: ts, Value: []byte(" \t[1, 2.50, -3e2] ")}},
		{"JSON string value", record.Record{Topic: "orders", Time: ts, Value: []byte(`"quoted \"x\" \u00e9"`)}},
		{"two JSON documents", record.Record{Topic: "orders", Time: ts, Value: []byte(`{} {}`)}},
		{"HTML characters", record.Record{Topic: "orders", Time: ts, Value: []byte(`<a href="x">&amp;</a>`)}},
		{"quotes and backslashes", record.Record{Topic: "o\"r\\ders", Time: ts, Key: []byte(`"\`), Value: []byte(`\"\\`)}},
		{"headers with nil values and repeated keys", record.Record{Topic: "orders", Time: ts,
			Headers: []record.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "", Value: []byte{}}, {Key: "line\nbreak", Value: []byte("v\r\n")}}}},
		{"time in another zone", record.Record{Topic: "orders", Time: time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", 2*3600))}},
		{"zero time, negative partition, largest offset", record.Record{Topic: "orders", Partition: -1, Offset: 1<<63 - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := encode.AppendJSONL(nil, &tc.rec)
			checkLine(t, line, &tc.rec)
			if again := encode.AppendJSONL([]byte("prefix"), &tc.rec); string(again) != "prefix"+string(line) {
				t.Fatalf("not deterministic, or the prefix is lost:\n%q\n%q", line, again)
			}
		})
	}
}

func TestAppendJSONLExactBytes(t *testing.T) {
	r := record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: ts, Key: []byte("k-1"), Value: []byte(`{"id":1}`),
		Headers: []record.Header{{Key: "trace", Value: []byte("abc")}, {Key: "none"}}}
	want := `{"topic":"orders","partition":3,"offset":1200,"timestamp":"2026-11-03T10:00:00.123Z","timestamp_type":"CreateTime","key":"k-1","value":{"id":1},` +
		`"headers":[{"key":"trace","value":"abc"},{"key":"none","value":null}]}` + "\n"
	if got := string(encode.AppendJSONL(nil, &r)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	multi := record.Record{Topic: "orders", Time: ts, Value: []byte("{\n\"a\":1\n}")}
	var line struct{ Value any }
	if err := json.Unmarshal(encode.AppendJSONL(nil, &multi), &line); err != nil || line.Value != "{\n\"a\":1\n}" {
		t.Errorf("JSON across lines: value %#v (%v), want the text as a string", line.Value, err)
	}
}

// Regression: validating values with gjson recursed once per nesting level,
// and a value of 8 Mi '[' (a few KB once compressed in a Kafka batch)
// overflowed the goroutine stack: a fatal error, not a recoverable panic.
func TestAppendJSONLDeeplyNestedValue(t *testing.T) {
	const depth = 1 << 23
	r := record.Record{Topic: "orders", Time: ts, Value: []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))}
	line := encode.AppendJSONL(nil, &r)
	if want := `"value":"` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `","headers":[]}` + "\n"; !bytes.HasSuffix(line, []byte(want)) {
		t.Errorf("the value is not written as a string: ...%q", line[len(line)-min(len(line), 80):])
	}
}

func FuzzAppendJSONL(f *testing.F) {
	f.Add("orders", int32(3), int64(1200), int64(1_700_000_000_123), []byte("k-1"), []byte(`{"id":1}`), false, false, "trace", []byte("abc"))
	f.Add("", int32(-1), int64(-1), int64(-62135596800000), []byte(nil), []byte(nil), true, true, "", []byte(nil))
	f.Add("o\xff", int32(0), int64(0), int64(0), []byte("\x00\u2028"), []byte("{\n\"a\":1}"), false, false, "h\n", []byte("\xff"))
	f.Add("orders", int32(1), int64(5), int64(1), []byte{}, []byte("{\"s\":\"\xff\u2029\"}"), false, false, "h", []byte{})
	f.Add("orders", int32(1), int64(5), int64(253402300800000), []byte("k"), []byte(" [1,\t2] "), false, false, "h", []byte("\r"))
	f.Fuzz(func(t *testing.T, topic string, partition int32, offset, ms int64, key, value []byte, nilKey, nilValue bool, hk string, hv []byte) {
		if y := time.UnixMilli(ms).UTC().Year(); y < 0 || y > 9999 {
			ms = 0 // RFC 3339 has four-digit years: such a line does not read back
		}
		r := record.Record{Topic: topic, Partition: partition, Offset: offset, Time: time.UnixMilli(ms), Key: key, Value: value,
			Headers: []record.Header{{Key: hk, Value: hv}}}
		if nilKey {
			r.Key = nil
		}
		if nilValue {
			r.Value = nil
		}
		line := encode.AppendJSONL(nil, &r)
		checkLine(t, line, &r)
		if again := encode.AppendJSONL(nil, &r); !bytes.Equal(line, again) {
			t.Fatalf("not deterministic:\n%q\n%q", line, again)
		}
	})
}

// Every line parses with encoding/json, whatever the value's nesting: the
// line's own object is one more level than the value.
func TestAppendJSONLLineParsesAtTheDepthLimit(t *testing.T) {
	for _, depth := range []int{9998, 9999, 10000} {
		// depth levels around a number, and depth levels whose innermost
		// is an empty array.
		for inner, v := range map[string]string{
			"1":  strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth),
			"[]": strings.Repeat("[", depth-1) + "[]" + strings.Repeat("]", depth-1),
		} {
			r := record.Record{Topic: "orders", Time: ts, Value: []byte(v)}
			line := encode.AppendJSONL(nil, &r)
			var parsed struct {
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(line, &parsed); err != nil {
				t.Errorf("value of %d levels (innermost %q): the line does not parse: %v", depth, inner, err)
			}
		}
	}
}
