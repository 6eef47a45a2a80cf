package encode_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// Each form of a value, key and header as the line writes it (docs/semantics.md,
// "Record contents in text sinks", shows these lines).
func TestJSONLForms(t *testing.T) {
	const head = `{"topic":"t","partition":0,"offset":7,"timestamp":"2026-11-03T10:00:00.123Z","timestamp_type":"CreateTime",`
	for _, tc := range []struct {
		name string
		rec  record.Record
		f    encode.ValueFormat
		want string
	}{
		{"JSON object", record.Record{Key: []byte("k"), Value: []byte(`{"id":9007199254740993}`)}, encode.FormatAuto,
			`"key":"k","value":{"id":9007199254740993},"headers":[]}`},
		{"text", record.Record{Value: []byte("plain text")}, encode.FormatAuto, `"key":null,"value":"plain text","headers":[]}`},
		{"tombstone", record.Record{}, encode.FormatAuto, `"key":null,"value":null,"headers":[]}`},
		{"the JSON text null", record.Record{Value: []byte("null")}, encode.FormatAuto,
			`"key":null,"value":null,"value_encoding":"json","headers":[]}`},
		{"a JSON string", record.Record{Value: []byte(`"hi"`)}, encode.FormatAuto,
			`"key":null,"value":"hi","value_encoding":"json","headers":[]}`},
		{"binary", record.Record{Key: []byte{0xff, 0x00}, Value: []byte{0, 0, 0, 0, 42, 0xc8},
			Headers: []record.Header{{Key: "h", Value: []byte{0xfe}}}}, encode.FormatAuto,
			`"key":"/wA=","key_encoding":"base64","value":"AAAAACrI","value_encoding":"base64","headers":[{"key":"h","value":"/g==","value_encoding":"base64"}]}`},
		{"forced text", record.Record{Value: []byte(`{"id":1}`)}, encode.FormatText, `"key":null,"value":"{\"id\":1}","headers":[]}`},
		{"forced base64", record.Record{Value: []byte(`{"id":1}`)}, encode.FormatBase64,
			`"key":null,"value":"eyJpZCI6MX0=","value_encoding":"base64","headers":[]}`},
		{"forced json", record.Record{Value: []byte(`[1]`)}, encode.FormatJSON, `"key":null,"value":[1],"headers":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec
			r.Topic, r.Offset, r.Time = "t", 7, ts
			line, err := encode.AppendJSONLAs(nil, &r, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(string(line), "\n"); got != head+tc.want {
				t.Errorf("got  %s\nwant %s", got, head+tc.want)
			}
			checkLine(t, line, &r)
		})
	}
}

// A value the forced format cannot write is a bad record: a *record.Error
// that says why, and nothing appended.
func TestJSONLFormatRefusals(t *testing.T) {
	for _, tc := range []struct {
		f     encode.ValueFormat
		value string
		want  error
	}{
		{encode.FormatJSON, "not json", encode.ErrNotJSON},
		{encode.FormatJSON, " {} ", encode.ErrNotJSON},
		{encode.FormatJSON, "{\"s\":\"\xff\"}", encode.ErrNotJSON},
		{encode.FormatText, "a\xffb", encode.ErrNotText},
	} {
		r := record.Record{Topic: "t", Partition: 2, Offset: 5, Value: []byte(tc.value)}
		line, err := encode.AppendJSONLAs([]byte("x"), &r, tc.f)
		var re *record.Error
		if !errors.As(err, &re) || !errors.Is(err, tc.want) || re.Offset != 5 || string(line) != "x" {
			t.Errorf("%s %q: %q, %v; want a *record.Error wrapping %v", tc.f, tc.value, line, err, tc.want)
		}
	}
}

// timestamp_type maps to Kafka's name of the record's timestamp type in a
// column (CSV, database sinks), as in a JSON line.
func TestTimestampTypeColumn(t *testing.T) {
	f, err := plan.ParseField("timestamp_type")
	if err != nil {
		t.Fatal(err)
	}
	col := encode.Column{Name: "ts_type", Field: f}
	if !col.NotNull() {
		t.Error("timestamp_type may be null")
	}
	for _, tc := range []struct {
		typ  record.TimestampType
		want string
	}{{record.CreateTime, "CreateTime"}, {record.LogAppendTime, "LogAppendTime"}} {
		r := record.Record{Topic: "t", Offset: 1, Time: time.UnixMilli(1), TimestampType: tc.typ}
		cs := encode.Cells{Record: &r}
		if got, ok := cs.Text(col); !ok || got != tc.want {
			t.Errorf("%v: %q (%v), want %q", tc.typ, got, ok, tc.want)
		}
		line := encode.AppendJSONL(nil, &r)
		back, err := encode.DecodeJSONL(line)
		if err != nil || back.TimestampType != tc.typ || !strings.Contains(string(line), `"timestamp_type":"`+tc.want+`"`) {
			t.Errorf("%v: line %s reads back as %v (%v)", tc.typ, line, back.TimestampType, err)
		}
	}
	if _, err := encode.DecodeJSONL([]byte(`{"topic":"t","timestamp":"2026-11-03T10:00:00.000Z","timestamp_type":"AppendTime","value":null}`)); err == nil || !strings.Contains(err.Error(), "timestamp_type") {
		t.Errorf("an unknown timestamp_type: %v, want an error naming it", err)
	}
}
