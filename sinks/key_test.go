package sinks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

func keyRecord(value string) *record.Record {
	r := &record.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC),
		Key: []byte("k-1"), Headers: []record.Header{{Key: "tenant", Value: []byte("a")}, {Key: "tenant", Value: []byte("b")}}}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func TestDefaultKey(t *testing.T) {
	r := keyRecord(`{"id":1}`)
	if got := sinks.DefaultKey(r); got != "orders/3/1200" {
		t.Errorf("DefaultKey = %q, want orders/3/1200", got)
	}
	for _, text := range []string{"", "  \n"} {
		k, err := sinks.NewKeyer(text)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Key(r); got != "orders/3/1200" || err != nil {
			t.Errorf("NewKeyer(%q).Key = %q, %v; want the default key", text, got, err)
		}
	}
	var nilKeyer *sinks.Keyer
	if got, err := nilKeyer.Key(r); got != "orders/3/1200" || err != nil {
		t.Errorf("nil Keyer: %q, %v; want the default key", got, err)
	}
}

func TestKeyTemplates(t *testing.T) {
	for _, tc := range []struct {
		template, value, want string
	}{
		{"{{ .Value.id }}", `{"id":42}`, "42"},
		{"{{ .Value.id }}", `{"id":"abc"}`, "abc"},
		{"{{ .Value.customer.id }}-{{ .Value.n }}", `{"customer":{"id":7},"n":2.50}`, "7-2.50"},
		// Regression: numbers were float64, so 1000000 rendered "1e+06" and
		// ids above 2^53 collided (…567 and …568 both gave …568).
		{"{{ .Value.id }}", `{"id":1000000}`, "1000000"},
		{"{{ .Value.id }}", `{"id":12345678901234567}`, "12345678901234567"},
		{"{{ .Key }}", `not json`, "k-1"},
		{"{{ .Value }}", `plain text`, "plain text"},
		{"{{ .Headers.tenant }}", `{}`, "b"},
		{`{{ index .Headers "tenant" }}/{{ .Value.id }}`, `{"id":1}`, "b/1"},
		{"{{ .Topic }}/{{ .Partition }}/{{ .Offset }}", ``, "orders/3/1200"},
		{`{{ .Timestamp.Format "2006-01-02" }}`, ``, "2026-11-03"},
	} {
		t.Run(tc.template+" on "+tc.value, func(t *testing.T) {
			k, err := sinks.NewKeyer(tc.template)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Key(keyRecord(tc.value))
			if err != nil || got != tc.want {
				t.Errorf("Key = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestKeyTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		name, template, value string
		empty                 bool // the error is ErrEmptyKey
	}{
		{"missing field", "{{ .Value.id }}", `{"x":1}`, false},
		{"value not JSON", "{{ .Value.id }}", `plain text`, false},
		{"tombstone", "{{ .Value.id }}", ``, false},
		{"missing header", "{{ .Headers.nope }}", `{}`, false},
		{"empty render", "{{ .Value.id }}", `{"id":""}`, true},
		{"JSON null", "{{ .Value.id }}", `{"id":null}`, true},
		// Regression: only a key that was exactly "<no value>" was refused,
		// so every record with a null id shared the key "order-<no value>".
		{"JSON null inside a longer key", "order-{{ .Value.id }}", `{"id":null}`, true},
		{"empty Kafka key", "{{ .Key }}", `{}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := sinks.NewKeyer(tc.template)
			if err != nil {
				t.Fatal(err)
			}
			r := keyRecord(tc.value)
			if tc.name == "empty Kafka key" {
				r.Key = nil
			}
			got, err := k.Key(r)
			var re *record.Error
			if !errors.As(err, &re) {
				t.Fatalf("Key = %q, %v; want a *RecordError", got, err)
			}
			if re.Topic != "orders" || re.Partition != 3 || re.Offset != 1200 {
				t.Errorf("RecordError at %s/%d@%d, want orders/3@1200", re.Topic, re.Partition, re.Offset)
			}
			if errors.Is(err, sinks.ErrEmptyKey) != tc.empty {
				t.Errorf("errors.Is(%v, ErrEmptyKey) = %v, want %v", err, !tc.empty, tc.empty)
			}
			if tc.name == "JSON null inside a longer key" && !strings.Contains(err.Error(), `rendered the key "order-<no value>": <no value> is a field that is null`) {
				t.Errorf("error %q does not name the key and its null field", err)
			}
		})
	}
}

func TestNewKeyerParseError(t *testing.T) {
	if _, err := sinks.NewKeyer("{{ .Value.id "); err == nil {
		t.Fatal("NewKeyer accepted an unterminated action")
	}
}

// A filter that needs the whole value parses it once; the key template
// reuses that parse. (One that reads only fields looks them up, and the
// key template looks up its own.)
func TestFilterSharesParsedValueWithKey(t *testing.T) {
	prog, err := filter.Compile(`value.status == "paid" && len(value) == 2 && headers.h == "v" && key == "k-1" && partition == 3`)
	if err != nil {
		t.Fatal(err)
	}
	f := filter.New(prog)
	keyer, _ := sinks.NewKeyer("{{ .Value.id }}")
	r := record.Record{Topic: "orders", Partition: 3, Offset: 7, Key: []byte("k-1"), Value: []byte(`{"id": 1000000, "status": "paid"}`),
		Headers: []record.Header{{Key: "h", Value: []byte("x")}, {Key: "h", Value: []byte("v")}}}
	if ok, err := f.Match(&r); !ok || err != nil {
		t.Fatalf("Match = %v, %v", ok, err)
	}
	r.Value = []byte(`{"id": 2}`) // changed behind the filter's back: the key still sees the parse
	if k, err := keyer.Key(&r); k != "1000000" || err != nil {
		t.Fatalf("Key = %q, %v; want the id parsed by the filter, as written", k, err)
	}
	bad := record.Record{Topic: "orders", Offset: 8, Value: []byte("not json")}
	_, err = f.Match(&bad)
	var re *record.Error
	var fe *filter.EvalError
	if !errors.As(err, &re) || re.Offset != 8 || !errors.As(err, &fe) {
		t.Fatalf("want a *RecordError wrapping a *FilterError, got %v", err)
	}
}
