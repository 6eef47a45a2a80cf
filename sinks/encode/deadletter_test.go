package encode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// A dead letter's JSON line is the record's line with the reason and the
// source coordinates added; the record's own line is unchanged.
func TestDeadLetterJSONL(t *testing.T) {
	r := record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC),
		Key: []byte("k-1"), Value: []byte("not json"), Headers: []record.Header{{Key: "h", Value: []byte("v")}}}
	dl := sinks.DeadLetter(r, `filter: the value is not JSON: "quoted"`)
	want := `{"topic":"orders","partition":3,"offset":1200,"timestamp":"2026-11-03T10:00:00.000Z","timestamp_type":"CreateTime","key":"k-1","value":"not json","headers":[{"key":"h","value":"v"}],` +
		`"error":"filter: the value is not JSON: \"quoted\"","source_topic":"orders","source_partition":3,"source_offset":1200}` + "\n"
	if got := string(encode.AppendJSONL(nil, &dl)); got != want {
		t.Errorf("dead letter line:\n%s\nwant:\n%s", got, want)
	}
	if got := string(encode.AppendJSONL(nil, &r)); strings.Contains(got, "error") {
		t.Errorf("the record itself is not a dead letter: %s", got)
	}
	if dl.DeadLetterReason() == "" || r.DeadLetterReason() != "" {
		t.Error("DeadLetterReason")
	}
}
