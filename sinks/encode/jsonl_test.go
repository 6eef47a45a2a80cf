package encode_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// jsonlLine mirrors one AppendJSONL line with encoding/json types.
type jsonlLine struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Timestamp string          `json:"timestamp"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   []jsonlHeader   `json:"headers"`
}

type jsonlHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func strOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// mirror is what encoding/json writes for the object AppendJSONL documents:
// the value embedded when it is one valid JSON document on one line, else a
// string, null for a tombstone.
func mirror(t testing.TB, r *record.Record) []byte {
	t.Helper()
	m := jsonlLine{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Key: strOrNil(r.Key), Headers: []jsonlHeader{}}
	switch v := r.Value; {
	case v == nil:
		m.Value = json.RawMessage("null")
	case len(v) > 0 && !bytes.ContainsAny(v, "\r\n") && json.Valid(v):
		m.Value = v
	default:
		m.Value, _ = json.Marshal(string(v))
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, jsonlHeader{h.Key, strOrNil(h.Value)})
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("mirror: %v", err)
	}
	return b
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", b)
	}
	return v
}

// checkLine checks that line is r as one JSONL line: a single JSON object
// of valid UTF-8 ending in its only newline, with no raw U+2028/U+2029 (line
// separators to some readers), decoding to the same value as mirror(r).
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
	got, want := decodeAny(t, line), decodeAny(t, mirror(t, r))
	if _, ok := got.(map[string]any); !ok {
		t.Fatalf("not a JSON object: %q", line)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("line decodes to\n\t%#v\nwant (encoding/json)\n\t%#v\nline: %q", got, want, line)
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
	r := record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: ts, Key: []byte("k-1"), Value: []byte(` {"id":1} `),
		Headers: []record.Header{{Key: "trace", Value: []byte("abc")}, {Key: "none"}}}
	want := `{"topic":"orders","partition":3,"offset":1200,"timestamp":"2026-11-03T10:00:00.123Z","key":"k-1","value":{"id":1},` +
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
