package record

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`{"id":12345678901234567890}`, map[string]any{"id": json.Number("12345678901234567890")}},
		{`[1,2]`, []any{json.Number("1"), json.Number("2")}},
		{`not json`, "not json"},
		{`{"a":1} trailing`, `{"a":1} trailing`}, // a valid prefix is not one document
		{``, ""},
	} {
		got, _ := json.Marshal(ParseValue([]byte(tc.in)))
		want, _ := json.Marshal(tc.want)
		if string(got) != string(want) {
			t.Errorf("ParseValue(%q) = %s, want %s", tc.in, got, want)
		}
	}
}

// A dead letter keeps the value the filter parsed, and the original record
// is left as it was.
func TestDeadLetterKeepsParsedValue(t *testing.T) {
	r := Record{Topic: "t", Offset: 7, Value: []byte(`{"x":1}`)}
	r.Note = &Note{Value: "parsed", Parsed: true}
	d := DeadLetter(r, "key template: no id")
	if d.DeadLetterReason() != "key template: no id" || d.ParsedValue() != "parsed" {
		t.Errorf("dead letter %+v", d.Note)
	}
	if r.DeadLetterReason() != "" {
		t.Errorf("the original record became a dead letter: %+v", r.Note)
	}
	e := NewError(&d, errors.ErrUnsupported)
	if e.Error() != "record t/0@7: unsupported operation" || !errors.Is(e, errors.ErrUnsupported) {
		t.Errorf("error %q", e)
	}
}
