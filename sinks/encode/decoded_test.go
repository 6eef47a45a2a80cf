package encode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// A decoded value is written as its JSON with the schema id after it (the
// key likewise); columns read the decoded value; a value that was not
// decoded is written as before.
func TestDecodedValueAndKey(t *testing.T) {
	r := record.Record{Topic: "orders", Partition: 1, Offset: 5, Time: time.UnixMilli(0),
		Key: []byte{0, 0, 0, 0, 3, 2}, Value: []byte{0, 0, 0, 0, 7, 10},
		Note: &record.Note{Decoded: &record.Decoded{Value: []byte(`{"n":5,"price":12.30}`), ValueSchemaID: 7, Key: []byte(`{"id":1}`), KeySchemaID: 3}}}
	line := string(AppendJSONL(nil, &r))
	want := `{"topic":"orders","partition":1,"offset":5,"timestamp":"1970-01-01T00:00:00.000Z","timestamp_type":"CreateTime",` +
		`"key":{"id":1},"key_schema_id":3,"value":{"n":5,"price":12.30},"value_schema_id":7,"headers":[]}` + "\n"
	if line != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	if !json.Valid([]byte(line)) {
		t.Fatal("not JSON")
	}
	if err := CheckValueFormat(&r, FormatJSON); err != nil {
		t.Fatalf("value_format json refuses a decoded value: %v", err)
	}
	cs := Cells{Record: &r}
	if got, _ := cs.Text(Column{Field: plan.Field{Kind: plan.FieldValuePath, Arg: "price"}}); got != "12.30" {
		t.Fatalf("value.price = %q, want 12.30", got)
	}
	if got, _ := cs.Text(Column{Field: plan.Field{Kind: plan.FieldValue}}); got != `{"n":5,"price":12.30}` {
		t.Fatalf("value = %q", got)
	}

	// only the value decoded: the key is written as before
	r.Note.Decoded.Key = nil
	line = string(AppendJSONL(nil, &r))
	if want := `"key":"\u0000\u0000\u0000\u0000\u0003\u0002","value":{"n":5,"price":12.30},"value_schema_id":7`; !strings.Contains(line, want) {
		t.Fatalf("got %s, want it to hold %s", line, want)
	}
}
