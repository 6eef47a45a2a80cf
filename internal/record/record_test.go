package record

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
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
		// Strings that would decode with U+FFFD in their place: two ids would read as one.
		{"{\"id\":\"\xff\"}", "{\"id\":\"\xff\"}"},
		{`{"id":"\ud800"}`, `{"id":"\ud800"}`},
		{`{"id":"\udc00\ud800"}`, `{"id":"\udc00\ud800"}`},
		{`{"id":"\ud83d\ude00\u00e9"}`, map[string]any{"id": "\U0001F600é"}},
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

// A cause that quotes a huge row is cut; the coordinates stay.
func TestErrorTextIsBounded(t *testing.T) {
	r := &Record{Topic: "orders", Partition: 2, Offset: 77}
	long := "value too long: Failing row contains (" + strings.Repeat("é", 100000) + ")"
	msg := NewError(r, errors.New(long)).Error()
	if !strings.HasPrefix(msg, "record orders/2@77: value too long") || len(msg) > MaxErrorText+100 || !strings.Contains(msg, "more bytes)") || !utf8.ValidString(msg) {
		t.Errorf("message of %d bytes: %.120q...", len(msg), msg)
	}
	if short := NewError(r, errors.New("bad")).Error(); short != "record orders/2@77: bad" {
		t.Errorf("short message changed: %q", short)
	}
}

// A record without IdemKey has the default key, its coordinates; with one,
// that key. Appending the default key allocates nothing, and a dead letter
// leaves the key of the sink it was keyed for behind.
func TestIdempotencyKey(t *testing.T) {
	r := Record{Topic: "orders", Partition: 3, Offset: 1200}
	buf := make([]byte, 0, 64)
	if got := r.IdempotencyKey(); got != "orders/3/1200" || string(r.AppendIdempotencyKey(buf)) != got {
		t.Errorf("default key %q, appended %q", got, r.AppendIdempotencyKey(buf))
	}
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendIdempotencyKey(buf[:0]) }); n != 0 {
		t.Errorf("appending the default key allocates %v times", n)
	}
	r.IdemKey = "order-7"
	if got := r.IdempotencyKey(); got != "order-7" || string(r.AppendIdempotencyKey(nil)) != got {
		t.Errorf("key %q, appended %q; want order-7", got, r.AppendIdempotencyKey(nil))
	}
	if d := DeadLetter(r, "bad"); d.IdempotencyKey() != "orders/3/1200" || r.IdemKey != "order-7" {
		t.Errorf("dead letter key %q, record's %q", d.IdempotencyKey(), r.IdemKey)
	}
}

// A mapped record becomes a dead letter with the value as read: the dead
// letter is the source record, whatever the mapping made of it.
func TestDeadLetterOfAMappedRecord(t *testing.T) {
	r := Record{Value: []byte(`{"a":2}`), IdemKey: "k", Note: &Note{Value: map[string]any{"a": 2}, Parsed: true, Original: []byte(`{"a":1}`)}}
	dl := DeadLetter(r, "rejected")
	if string(dl.Value) != `{"a":1}` || dl.Mapped() || dl.Note.Parsed || dl.DeadLetterReason() != "rejected" || dl.IdemKey != "" {
		t.Errorf("dead letter value %s, mapped %v, parsed %v, reason %q, key %q; want the original value, unparsed", dl.Value, dl.Mapped(), dl.Note.Parsed, dl.DeadLetterReason(), dl.IdemKey)
	}
	if string(r.Value) != `{"a":2}` || !r.Mapped() {
		t.Errorf("DeadLetter changed the record it was given: %s", r.Value)
	}
}
