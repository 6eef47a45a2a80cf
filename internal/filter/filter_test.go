package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, s string) any {
	t.Helper()
	if !json.Valid([]byte(s)) {
		return s
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatch(t *testing.T) {
	ts := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	numbers := `{"big": 92233720368547758071, "d": 1234567890.123456789012345678901234567890, "x": 1e400, "y": -1E-400, "z": 0.10, "e": 2E+3, "list": [1, 18446744073709551616]}`
	value := `{"id": 9007199254740993, "status": "paid", "amount": 12.5, "qty": 3, "ids": [1, 2, 42], "items": [{"qty": 1}, {"qty": 5}], "nested": {"a": {"b": 7}}, "flag": true, "none": null}`
	tests := []struct {
		expr  string
		value string
		want  bool
		err   string
	}{
		{`value.status == "paid"`, value, true, ""},
		{`value.status == "refunded"`, value, false, ""},
		{`value.amount > 10`, value, true, ""},
		{`value.amount == 12.5`, value, true, ""},
		{`value.qty == 3`, value, true, ""},
		{`value.qty + 1 == 4`, value, true, ""},
		{`value.id == 9007199254740993`, value, true, ""},
		{`42 in value.ids`, value, true, ""},
		{`value.ids[2] == 42`, value, true, ""},
		{`any(value.items, .qty > 4)`, value, true, ""},
		{`all(value.items, #.qty >= 1)`, value, true, ""},
		{`any(value.ids, # == 2)`, value, true, ""},
		{`value.nested.a.b == 7`, value, true, ""},
		{`value?.nested?.a?.b == 7`, value, true, ""},
		{`value?.missing?.a == nil`, value, true, ""},
		{`value.missing == nil`, value, true, ""},
		{`value.none == nil`, value, true, ""},
		{`value.flag`, value, true, ""},
		{`value.flag && value.qty < 5`, value, true, ""},
		{`let q = value.qty; q * 2 == 6`, value, true, ""},
		{`len(value.items) == 2`, value, true, ""},
		{`value.ids[0:2] == [1, 2]`, value, true, ""},
		{`key == "k-1"`, value, true, ""},
		{`key startsWith "k-"`, value, true, ""},
		{`headers["trace"] == "abc"`, value, true, ""},
		{`headers.trace == "abc"`, value, true, ""},
		{`"trace" in headers`, value, true, ""},
		{`headers["nope"] == ""`, value, true, ""},
		{`timestamp >= date("2026-11-03T09:00:00Z")`, value, true, ""},
		{`timestamp.Hour() == 10`, value, true, ""},
		{`timestamp == date("2026-11-03 10:00:00", "2006-01-02 15:04:05")`, value, true, ""},
		{`partition == 3 && offset > 1000 && topic == "orders"`, value, true, ""},
		{`value == "plain text"`, "plain text", true, ""},
		{`value contains "text"`, "plain text", true, ""},
		{`value == nil`, "", true, ""},
		{`value.status == "paid"`, "plain text", false, "the value is not JSON: "},
		{`value.status == "paid"`, "", false, ""}, // a tombstone: no status
		{`value.status != "paid"`, "", true, ""},
		{`value.missing.deeper == nil`, value, true, ""},
		{`value.none.deeper == nil`, value, true, ""},
		{`(value?.nested).a.b == 7`, value, true, ""},
		{`value.amount > 10`, "", false, "invalid operation"}, // nil > 10
		{`(value.amount ?? 0) > 10`, "", false, ""},
		{`value.status == "paid"`, "[1, 2]", false, "invalid operation"},
		{`value.items[5] == nil`, value, false, "index out of range"},
		{`value.qty`, value, false, "not a bool"},
		// A number a float64 would change is an error, not a rounded comparison.
		{`value.big > 5`, numbers, false, "the number 92233720368547758071 is not one a filter compares exactly"},
		{`value.big == 9.2e19`, numbers, false, "is not one a filter compares exactly"},
		{`value.d == 1234567890.1234567`, numbers, false, "the number 1234567890.123456789012345678901234567890 is not"},
		{`value.x == "1e400"`, numbers, false, "the number 1e400 is not"},
		{`value.y < 0`, numbers, false, "the number -1E-400 is not"},
		{`any(value.list, # > 1)`, numbers, false, "the number 18446744073709551616 is not"},
		{`value.big.String() == "92233720368547758071"`, numbers, true, ""},
		{`value.z == 0.1 && value.z > 0.09`, numbers, true, ""},
		{`value.e == 2000`, numbers, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" "+tt.value[:min(len(tt.value), 10)], func(t *testing.T) {
			p, err := Compile(tt.expr)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			var v any
			if tt.value != "" {
				v = parse(t, tt.value)
			}
			env := &Env{Key: "k-1", Value: v, Headers: map[string]string{"trace": "abc"}, Timestamp: ts, Partition: 3, Offset: 1200, Topic: "orders"}
			got, err := p.Matcher().Match(env)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err = %v, want %q", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatalf("Match: %v", err)
			case got != tt.want:
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

// The value is shared with the key template: numbers stay json.Number.
func TestMatchDoesNotChangeTheValue(t *testing.T) {
	p, err := Compile(`42 in value.ids && value.n == 1`)
	if err != nil {
		t.Fatal(err)
	}
	v := parse(t, `{"ids": [42], "n": 1}`)
	if ok, err := p.Matcher().Match(&Env{Value: v}); !ok || err != nil {
		t.Fatalf("Match = %v, %v", ok, err)
	}
	m := v.(map[string]any)
	if _, ok := m["n"].(json.Number); !ok {
		t.Errorf("value.n is %T now", m["n"])
	}
	if _, ok := m["ids"].([]any)[0].(json.Number); !ok {
		t.Errorf("value.ids[0] is %T now", m["ids"].([]any)[0])
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		expr, want string
	}{
		{`status == "paid"`, `column 1: unknown name status (a filter sees key, value, headers, timestamp, partition, offset, topic; a field of the value is value.status)`},
		{`value.status == "paid`, `column 22: literal not terminated`},
		{`value.status`, ``}, // unknown type: checked per record
		{`key + "x"`, `expected bool, but got string`},
		{`partition + 1`, `expected bool, but got int`},
		{"  ", "empty expression"},
		{`value.a ==`, `unexpected token EOF`},
		{`value.z > 0.0999999999999999999`, `column 11: the number 0.0999999999999999999 is not one a filter compares exactly: it compares as the float64 0.1; compare a field's text instead, e.g. value.amount.String() == "0.0999999999999999999"`},
		{"value.a == 1 &&\n  value.z > 1.000000000000000001", `line 2, column 13: the number 1.000000000000000001 is not one`},
		{`value.z > 19.99 && value.z < 1e3 && value.z != 2.50`, ``},
		{`value.id == 18446744073709551616`, `the integer 18446744073709551616 is beyond the 64-bit integers a filter compares: compare the field's text instead, e.g. value.id.String() == "18446744073709551616"`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Compile(tt.expr)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want *Error containing %q", err, tt.want)
			}
		})
	}
}

func TestUses(t *testing.T) {
	p, _ := Compile(`key == "a"`)
	if p.UsesValue || p.UsesHeaders {
		t.Errorf("key only: %+v", p)
	}
	p, _ = Compile(`value.a == 1 || headers.x == "y"`)
	if !p.UsesValue || !p.UsesHeaders {
		t.Errorf("value and headers: %+v", p)
	}
}
