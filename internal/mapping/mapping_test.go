package mapping

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// compileSet returns a set step writing each expression at its path, in
// order.
func compileSet(t *testing.T, pairs ...string) Step {
	t.Helper()
	s := Step{Kind: Set}
	for i := 0; i+1 < len(pairs); i += 2 {
		to, err := ParsePath(pairs[i])
		if err != nil {
			t.Fatal(err)
		}
		e, err := CompileExpr(pairs[i+1])
		if err != nil {
			t.Fatalf("%s: %v", pairs[i+1], err)
		}
		s.Ops = append(s.Ops, Op{To: to, Expr: e})
	}
	return s
}

func paths(t *testing.T, kind Kind, pairs ...string) Step {
	t.Helper()
	s := Step{Kind: kind}
	step := 2
	if kind == Drop {
		step = 1
	}
	for i := 0; i < len(pairs); i += step {
		from, err := ParsePath(pairs[i])
		if err != nil {
			t.Fatal(err)
		}
		op := Op{From: from}
		if kind == Rename {
			if op.To, err = ParsePath(pairs[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		s.Ops = append(s.Ops, op)
	}
	return s
}

func newRecord(value string) *record.Record {
	return &record.Record{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k1"),
		Time:    time.Date(2026, 11, 3, 23, 30, 0, 0, time.UTC),
		Headers: []record.Header{{Key: "src", Value: []byte("eu")}},
		Value:   []byte(value)}
}

func apply(t *testing.T, value string, steps ...Step) (string, error) {
	t.Helper()
	r := newRecord(value)
	err := New(steps).Apply(r)
	if err != nil {
		if string(r.Value) != value || r.Mapped() {
			t.Errorf("a failed mapping changed the record: %s", r.Value)
		}
		return "", err
	}
	if string(r.Note.Original) != value {
		t.Errorf("Original = %s, want %s", r.Note.Original, value)
	}
	return string(r.Value), nil
}

func TestSteps(t *testing.T) {
	cases := []struct {
		name, in, want string
		steps          []Step
	}{
		{"set top level", `{"amount":19.99,"cust":"c1"}`, `{"amount":19.99,"cust":"c1","amount_eur":18.3908,"src":"orders"}`,
			[]Step{compileSet(t, "amount_eur", "value.amount * 0.92", "src", "topic")}},
		{"set nested creates objects", `{"a":1}`, `{"a":1,"meta":{"by":{"who":"k1"}}}`,
			[]Step{compileSet(t, "value.meta.by.who", "key")}},
		{"set replaces in place", `{"a":1,"b":2}`, `{"a":3,"b":2}`, []Step{compileSet(t, "a", "value.a + value.b")}},
		{"set sees the previous set", `{"a":1}`, `{"a":1,"b":2,"c":4}`, []Step{compileSet(t, "b", "value.a * 2", "c", "value.b * 2")}},
		{"set copies a number as written", `{"a":1.50,"big":123456789012345678901234567890}`, `{"a":1.50,"big":123456789012345678901234567890,"c":1.50,"d":123456789012345678901234567890}`,
			[]Step{compileSet(t, "c", "value.a", "d", "value.big")}},
		{"set an object keeps its order", `{"o":{"z":1,"a":2}}`, `{"o":{"z":1,"a":2},"p":{"z":1,"a":2}}`, []Step{compileSet(t, "p", "value.o")}},
		{"set headers and coordinates", `{}`, `{"h":"eu","at":"orders/2@41"}`,
			[]Step{compileSet(t, "h", "headers.src", "at", `topic + "/" + string(partition) + "@" + string(offset)`)}},
		{"rename nested", `{"cust":{"id":7},"x":1}`, `{"x":1,"customer":{"key":{"id":7}}}`,
			[]Step{paths(t, Rename, "value.cust", "customer.key")}},
		{"rename inside an object keeps siblings", `{"c":{"a":1,"b":2}}`, `{"c":{"b":2,"z":1}}`, []Step{paths(t, Rename, "c.a", "value.c.z")}},
		{"rename missing is no change", `{"a":1}`, `{"a":1}`, []Step{paths(t, Rename, "nope", "b", "x.y", "c")}},
		{"drop nested and top", `{"a":1,"debug":{"t":1},"c":{"d":1,"e":2}}`, `{"a":1,"c":{"e":2}}`, []Step{paths(t, Drop, "value.debug", "c.d")}},
		{"drop missing is no change", `{"a":1,"n":null}`, `{"a":1,"n":null}`, []Step{paths(t, Drop, "b", "b.c.d", "n.x")}},
		{"steps in order", `{"cust":"c1","debug":true,"amount":10}`, `{"amount":10,"customer":"c1","total":30}`,
			[]Step{paths(t, Rename, "cust", "customer"), paths(t, Drop, "debug"), compileSet(t, "total", "value.amount * 3")}},
		{"strings stay as they are", `{"s":"<a&b>\u00e9\n"}`, `{"s":"<a&b>é\n","t":"<a&b>é\nx"}`, []Step{compileSet(t, "t", `value.s + "x"`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := apply(t, c.in, c.steps...)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestTombstoneUnmapped(t *testing.T) {
	r := newRecord("")
	r.Value = nil
	if err := New([]Step{paths(t, Drop, "a")}).Apply(r); err != nil || r.Value != nil || r.Mapped() {
		t.Fatalf("tombstone: err %v, value %q, mapped %v", err, r.Value, r.Mapped())
	}
}

func TestArithmetic(t *testing.T) {
	cases := []struct{ in, expr, want string }{
		{`{"p":19.99}`, "value.p * 3", "59.97"},
		{`{"p":19.99}`, "value.p * 0.92", "18.3908"},
		{`{"a":0.1,"b":0.2}`, "value.a + value.b", "0.3"},
		{`{"a":1.10}`, "value.a - 0.1", "1.00"},
		{`{"a":7}`, "value.a / 2", "3.5"},
		{`{"a":10}`, "value.a / 4", "2.5"},
		{`{"a":10}`, "round(value.a / 3, 2)", "3.33"},
		{`{"a":20}`, "round(value.a / 3, 2)", "6.67"},
		{`{"a":-20}`, "round(value.a / 3, 0)", "-7"},
		{`{"a":2.345}`, "round(value.a, 2)", "2.35"},
		{`{"a":7}`, "value.a % 3", "1"},
		{`{"a":5}`, "-value.a", "-5"},
		{`{"a":1.5}`, "-value.a", "-1.5"},
		{`{"a":9223372036854775806}`, "value.a + 1", "9223372036854775807"},
		{`{"a":"19.99"}`, "decimal(value.a) * 2", "39.98"},
		{`{"a":1.5e1}`, "value.a + 1", "16"},
		{`{"a":1.50}`, "value.a == 1.5", "true"},
		{`{"a":2}`, "value.a > 1.99 && value.a <= 2", "true"},
		{`{"a":"x"}`, `value.a == "x" ? 1 : 2`, "1"},
		{`{"a":2.0}`, `value.a in [1, 2, 3]`, "true"},
		{`{"a":2.5}`, `value.a not in [1, 2, 3]`, "true"},
		{`{"a":{"k":1}}`, `"k" in value.a`, "true"},
		{`{"a":1.50}`, `"x" + string(value.a)`, `"x1.50"`},
		{`{"items":[{"q":2},{"q":3.5}]}`, `len(filter(value.items, .q > 2))`, "1"},
		{`{"a":null}`, `value.a ?? 0.5`, "0.5"},
		{`{"o":{"p":19.990}}`, `toJSON(value.o)`, `"{\n  \"p\": 19.990\n}"`},
		{`{}`, `format_time(timestamp, "2006-01-02 15:04 MST", "Europe/Berlin")`, `"2026-11-04 00:30 CET"`},
		{`{}`, `format_time(timestamp, "RFC3339", "UTC")`, `"2026-11-03T23:30:00Z"`},
		{`{"a":3,"b":1.5,"c":"x"}`, `[type(value.a), type(value.b), type(value.a * 2), type(value.b * 2), type(1.5), type(value.c), type(value.d)]`,
			`["int","decimal","int","decimal","decimal","string","nil"]`},
	}
	for _, c := range cases {
		got, err := apply(t, c.in, compileSet(t, "r", c.expr))
		if err != nil {
			t.Errorf("%s over %s: %v", c.expr, c.in, err)
			continue
		}
		want := c.in[:len(c.in)-1]
		if want != "{" {
			want += ","
		}
		want += `"r":` + c.want + "}"
		if got != want {
			t.Errorf("%s over %s: got %s, want %s", c.expr, c.in, got, want)
		}
	}
}

func TestRefused(t *testing.T) {
	cases := []struct {
		in   string
		step Step
		want string
	}{
		{`{"a":9223372036854775807}`, compileSet(t, "r", "value.a + 1"), "mapping step 1 (set value.r): value.a (9223372036854775807) + 1 overflows a 64-bit integer"},
		{`{"a":4611686018427387904}`, compileSet(t, "r", "value.a * 2"), "value.a (4611686018427387904) * 2 overflows a 64-bit integer"},
		{`{"a":123456789012345678901}`, compileSet(t, "r", "value.a + 1"), "value.a (123456789012345678901) is beyond a 64-bit integer (it would lose digits)"},
		{`{"a":10}`, compileSet(t, "r", "value.a / 3"), "value.a (10) / 3 is not a finite decimal; round it explicitly: round(a / b, places)"},
		{`{"a":1}`, compileSet(t, "r", "value.a / 0"), "value.a (1) / 0: division by zero"},
		{`{"a":12345678901234567890.123456789012345678}`, compileSet(t, "r", "value.a * 1.5"), "has 39 significant digits; a decimal keeps at most 38"},
		{`{"a":1.5}`, compileSet(t, "r", "value.a % 1"), "% takes integers"},
		{`{"a":1.5}`, compileSet(t, "r", "round(value.a, -1)"), "round: places must be 0 to 1000, got -1"},
		{`{"a":10}`, compileSet(t, "r", "round(value.a / 3, 1001)"), "round: places must be 0 to 1000, got 1001"},
		{`{"a":10}`, compileSet(t, "r", "round(value.a / 3, 1.5)"), "round: places must be a whole number, got 1.5"},
		{`{"a":10}`, compileSet(t, "r", "round(value.a / 0, -1)"), "round: places must be 0 to 1000, got -1"},
		{`{"a":"x"}`, compileSet(t, "r", "value.a * 2"), "invalid operation: string * number"},
		{`{"a":1}`, compileSet(t, "r", "timestamp"), "the expression returned a time: write it as text with format_time(t, layout, zone)"},
		{`{"a":1}`, compileSet(t, "r", `format_time(timestamp, "2006", headers.src)`), `format_time: unknown zone "eu"`},
		{`{"a":{"b":1}}`, compileSet(t, "a.b.c", "1"), "mapping step 1 (set value.a.b.c): value.a.b is a number, not an object"},
		{`{"a":1,"b":2}`, paths(t, Rename, "a", "b"), "mapping step 1 (rename value.a): value.b already holds a field: a rename does not overwrite one (drop it first)"},
		{`{"a":"s"}`, paths(t, Drop, "a.b"), "mapping step 1 (drop value.a.b): value.a is a string, not an object"},
		{`[1,2]`, paths(t, Drop, "a"), "the value is a JSON array, not an object"},
		{`not json`, paths(t, Drop, "a"), "mapping: the value is not JSON: invalid character 'o' in literal null (expecting 'u')"},
		{``, paths(t, Drop, "a"), "mapping: the value is empty (0 bytes), not JSON"},
		{"ab\xc3(", paths(t, Drop, "a"), "mapping: the value is not JSON: it holds bytes that are not UTF-8 (byte 0xc3 at 2)"},
		{`{"a":1,"a":2}`, paths(t, Drop, "b"), `mapping: the value has the key "a" twice in one object: a mapping would not know which one to keep`},
		{"{\"a\":\"\xff\"}", paths(t, Drop, "b"), "mapping: the value has a string that is not valid Unicode"},
		{`{"a":"\ud800"}`, paths(t, Drop, "b"), "mapping: the value has a string that is not valid Unicode"},
		{`{"a":["x\udc00"]}`, paths(t, Drop, "b"), "mapping: the value has a string that is not valid Unicode"},
	}
	for _, c := range cases {
		_, err := apply(t, c.in, c.step)
		var re *record.Error
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a record error containing %q", c.in, err, c.want)
		}
	}
	_, err := apply(t, `{"a":1}`, paths(t, Drop, "x"), compileSet(t, "r", "value.a / 3"))
	var se *StepError
	if !errors.As(err, &se) || se.Step != 2 || se.Path.String() != "value.r" {
		t.Errorf("the failing step is not named: %#v", se)
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`format_time(timestamp, "2006-01-02")`, "column 1: format_time needs a zone as its third argument"},
		{`format_time(timestamp, "2006-01-02", "Mars/Base")`, `column 38: format_time: unknown zone "Mars/Base"`},
		{`format_time(timestamp, "2006-01-02", "Local")`, `format_time: zone "Local" is the machine's zone`},
		{`float(value.a)`, "float() is not offered in a mapping"},
		{`now()`, "now() is not offered in a mapping"},
		{`amount * 2`, "unknown name amount (an expression sees key, value"},
		{`value.a +`, "column"},
		{` `, "empty expression"},
	}
	for _, c := range cases {
		_, err := CompileExpr(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		}
	}
}

func TestParsePath(t *testing.T) {
	for in, want := range map[string]string{"customer": "value.customer", "value.customer": "value.customer", "a.b.c": "value.a.b.c", "value.value": "value.value"} {
		p, err := ParsePath(in)
		if err != nil || p.String() != want {
			t.Errorf("%s: got %v, %v; want %s", in, p, err, want)
		}
	}
	for in, want := range map[string]string{"": "is not a field", "value": "is not a field", "a..b": "empty key", "a.": "empty key", "a. b": "spaces around it"} {
		if _, err := ParsePath(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}

// A value the decode stage decoded is mapped from its decoded JSON: the
// mapped value is what the later stages and the sinks read, the framed
// bytes stay the original, and a dead letter of it is the decoded record
// as read.
func TestMapsTheDecodedValue(t *testing.T) {
	framed := []byte("\x00\x00\x00\x00\x07\x02\x0e")
	r := newRecord("")
	r.Value = framed
	r.Note = &record.Note{Decoded: &record.Decoded{Value: []byte(`{"id":7,"debug":1}`), ValueSchemaID: 7}}
	if err := New([]Step{paths(t, Drop, "debug")}).Apply(r); err != nil {
		t.Fatal(err)
	}
	if string(r.Value) != `{"id":7}` || string(r.JSONValue()) != `{"id":7}` || string(r.OriginalValue()) != string(framed) {
		t.Errorf("value %q, JSONValue %q, original %q; want the mapped decoded value and the framed bytes", r.Value, r.JSONValue(), r.OriginalValue())
	}
	dl := record.DeadLetter(*r, "rejected")
	if string(dl.Value) != string(framed) || string(dl.JSONValue()) != `{"id":7,"debug":1}` {
		t.Errorf("dead letter value %q, JSONValue %q; want the record as read and decoded", dl.Value, dl.JSONValue())
	}
}
