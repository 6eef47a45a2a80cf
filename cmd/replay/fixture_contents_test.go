package main

import (
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// A sink's line is a fixture line: replay test reads each record of the
// contents corpus, written by AppendJSONL (and as a dead letter), back to
// its original bytes.
func TestFixtureReadsSinkLines(t *testing.T) {
	for _, r := range sinktest.Corpus() {
		for _, line := range [][]byte{encode.AppendJSONL(nil, &r), encode.AppendJSONL(nil, new(record.DeadLetter(r, "filter: boom")))} {
			fx, err := parseFixture(line[:len(line)-1], "other", 99)
			if err != nil {
				t.Fatalf("offset %d: %v", r.Offset, err)
			}
			fx.rec.Note = nil
			sinktest.CompareContents(t, fx.rec, r)
		}
	}
}

// A fixture line that does not parse says which field is wrong and what
// it holds, and a misspelt field gets the nearest name; timestamp_type
// takes Kafka's two names, null or nothing (CreateTime), never "".
func TestFixtureErrorsNameTheField(t *testing.T) {
	const ts = `"timestamp":"2026-11-03T10:00:00Z","value":{"id":1}`
	for _, tc := range []struct{ line, want string }{
		{`{` + ts + `,"timestamp_type":5}`, `timestamp_type: a JSON number where "CreateTime" or "LogAppendTime" belongs`},
		{`{` + ts + `,"timestamp_typ":"CreateTime"}`, `unknown field "timestamp_typ": a fixture line has `},
		{`{` + ts + `,"timestamp_typ":"CreateTime"}`, `(did you mean "timestamp_type"?)`},
		{`{` + ts + `,"timestamp_type":""}`, `timestamp_type "": want CreateTime or LogAppendTime`},
		{`{` + ts + `,"timestamp_type":"AppendTime"}`, `timestamp_type "AppendTime": want CreateTime or LogAppendTime`},
		{`{` + ts + `,"partition":"3"}`, `partition: a JSON string where an integer belongs`},
	} {
		_, err := parseFixture([]byte(tc.line), "orders", 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.line, err, tc.want)
		}
	}
	for line, want := range map[string]record.TimestampType{
		`{` + ts + `}`: record.CreateTime, `{` + ts + `,"timestamp_type":null}`: record.CreateTime,
		`{` + ts + `,"timestamp_type":"CreateTime"}`: record.CreateTime, `{` + ts + `,"timestamp_type":"LogAppendTime"}`: record.LogAppendTime,
	} {
		fx, err := parseFixture([]byte(line), "orders", 0)
		if err != nil || fx.rec.TimestampType != want {
			t.Errorf("%s: %v (%v), want %v", line, fx.rec.TimestampType, err, want)
		}
	}
}

// A line of a file sink whose plan decoded holds the decoded key and value
// (with their schema ids), not the record's bytes: it is refused saying
// so and where framed bytes come from, instead of as a key of the wrong
// type or an unknown field.
func TestFixtureOfDecodedOutputSaysSo(t *testing.T) {
	for _, line := range []string{
		`{"topic":"orders","partition":0,"offset":0,"timestamp":"2026-12-08T02:50:07.370Z","timestamp_type":"CreateTime","key":{"id":0},"key_schema_id":5,"value":{"id":0},"value_schema_id":2,"headers":[]}`,
		`{"topic":"errs","partition":0,"offset":2,"timestamp":"2026-12-08T02:52:25.976Z","timestamp_type":"CreateTime","key":null,"value":{"a":2},"value_schema_id":13,"headers":[]}`,
	} {
		_, err := parseFixture([]byte(line), "orders", 0)
		if err == nil || !strings.Contains(err.Error(), "decoded") || !strings.Contains(err.Error(), "value_encoding: base64") {
			t.Errorf("%s: %v, want a refusal naming the decoded output and the framed bytes to give instead", line, err)
		}
	}
}
