package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/tidwall/gjson"
)

// reference is Scan's definition spelt out with the standard library
// (and gjson, a recursive validator, for a document deeper than
// encoding/json goes when the depth is not limited).
func reference(v []byte, o jsonscan.Options) jsonscan.Kind {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	switch {
	case !validAtDepth(v, o.MaxDepth),
		o.OneLine && bytes.ContainsAny(v, "\n\r"),
		o.Trimmed && (space(v[0]) || space(v[len(v)-1])),
		(o.UTF8 || o.NoLineSeparators) && !utf8.Valid(v),
		o.NoLineSeparators && bytes.ContainsAny(v, "\u2028\u2029"),
		o.Jsonb && !jsonbReference(v):
		return jsonscan.Invalid
	}
	return kindReference(v)
}

// validAtDepth: encoding/json.Valid takes v inside enough arrays to make
// its depth limit maxDepth; gjson.ValidBytes when maxDepth is below 0,
// and when it is 0 and v is 64 KiB or less.
func validAtDepth(v []byte, maxDepth int) bool {
	switch {
	case maxDepth < 0 || maxDepth == 0 && len(v) <= 64<<10:
		return gjson.ValidBytes(v)
	case maxDepth == 0:
		return json.Valid(v)
	}
	k := jsonscan.EncodingJSONDepth - maxDepth
	return json.Valid(v) && json.Valid([]byte(strings.Repeat("[", k)+string(v)+strings.Repeat("]", k)))
}

func kindReference(v []byte) jsonscan.Kind {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return jsonscan.Invalid
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return jsonscan.Object
		}
		return jsonscan.Array
	case string:
		return jsonscan.String
	case json.Number:
		return jsonscan.Number
	case bool:
		if tok {
			return jsonscan.True
		}
		return jsonscan.False
	}
	return jsonscan.Null
}

// jsonbReference is jsonb's rules on the tokens encoding/json reads from
// v (valid): no string holds a NUL (which only \u0000 writes), no string
// holds more U+FFFD than its text writes (encoding/json reads a lone
// surrogate's escape as U+FFFD), every number within numeric's range.
func jsonbReference(v []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case string:
			raw := v[start:dec.InputOffset()]
			if strings.IndexByte(tok, 0) >= 0 || strings.Count(tok, "\uFFFD") > writtenFFFD(raw) {
				return false
			}
		case json.Number:
			if !numericReference(string(tok)) {
				return false
			}
		}
	}
}

// writtenFFFD counts the U+FFFD a string's text writes: raw, escaped, or
// as a byte that is not UTF-8 (which encoding/json reads as U+FFFD).
func writtenFFFD(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); {
		switch r, size := utf8.DecodeRune(raw[i:]); {
		case r == '\\' && raw[i+1] == 'u':
			if strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
				n++
			}
			i += 6
		case r == '\\':
			i += 2
		case r == utf8.RuneError:
			n++
			i += size
		default:
			i += size
		}
	}
	return n
}

var numberParts = regexp.MustCompile(`^-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?$`)

// numericReference: PostgreSQL's numeric holds at most 131072 digits
// before the decimal point (counted from the first non-zero digit, the
// exponent applied) and 16383 after it (the fraction digits as written
// less the exponent); an exponent beyond 2^24 is out of range.
func numericReference(n string) bool {
	m := numberParts.FindStringSubmatch(n)
	exp := 0
	if m[3] != "" {
		e, err := strconv.Atoi(m[3])
		if err != nil || e > 1<<24 || e < -(1<<24) {
			return false
		}
		exp = e
	}
	if len(m[2])-exp > 16383 {
		return false
	}
	all := strings.TrimLeft(m[1]+m[2], "0")
	if all == "" {
		return true // zero
	}
	firstNonZero := len(m[1]) - (len(m[1]+m[2]) - len(all)) // digits before the point from it
	return firstNonZero+exp <= 131072
}

var cases = []string{
	`{"id":"ord-1","amount":379.50,"items":4,"ok":true,"x":null,"s":{"a":[1,2,{"b":false}]}}`,
	`[]`, `{}`, `[ ]`, "{ \t}", `"x"`, `0`, `-0.5e+10`, `1E5`, `true`, `false`, `null`, `"\u00e9\n\"\\\/\b\f\r\t"`, `"é ü 日本 🎉"`,
	`{"a" : 1 , "b":[ 1 , 2 ] }`, `[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]`, "\n{\"a\":\r\n1}\t", " 1", "1 ", "\t{}", "{}\n", "[1,\r2]",
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `{"a":1 "b":2}`, `[}`, `{]`, `[1]]`, `{}{}`, `1 2`,
	`01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `tru`, `truex`, `nul`, `fals`, `True`, `[1,2`, `{"a":1`, `{"a"`,
	`"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, `"a` + "\x01" + `b"`, `"\`, "\"tab\tinside\"", "\"\xff\"", "\"\xe2\x80\xa8\"", "\"\xe2\x80\xa9\"",
	"\"\xe2\x80\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "\xef\xbb\xbf{}", `"12345678"`, `"1234567\"`, `"123456789012345\u0041"`,
	`"12345678901234` + "\x7f" + `"`, `{"a":"\u0000"}`, `"\\u0000"`, `"\u0041"`, `"\ud800"`, `"\udc00"`, `"\ud83d\ude00"`, `"\ud83d\u0041"`,
	`"\ud83dx"`, `"\ud83d"`, `"\uDBFF\uDFFF"`, `"\udc00\ud800"`, `"\ud800\ufffd"`, `"\\ufffd\ud800"`, "\"\uFFFD\\ud800\"", `"\ud800\`,
	`"\ud800\u12"`, `1e131071`, `1e131072`, `-1e131072`, `0.001e131075`, `0.001e131074`, `1e-16383`, `1e-16384`, `1.5e-16383`,
	`0.1e-16383`, `0e200000`, `0e-16383`, `0e-16384`, `100e-16385`, `1.000e-16381`, `1E+5`, `12.5E-3`, `0.0005`, `-0`, `1e99999999999`,
	`[1, 2.50, {"x": -3e2}]`, "1" + strings.Repeat("0", 131071), "1" + strings.Repeat("0", 131072),
	"0." + strings.Repeat("0", 16382) + "1", "0." + strings.Repeat("0", 16383) + "1", "-" + strings.Repeat("0", 20000),
}

// optionSets are the options of the tests: each alone, those of a JSONL
// line and those of a jsonb column.
var optionSets = []jsonscan.Options{
	{}, {OneLine: true}, {Trimmed: true}, {UTF8: true}, {NoLineSeparators: true}, {MaxDepth: -1}, {MaxDepth: 1}, {MaxDepth: 3},
	{MaxDepth: jsonscan.EncodingJSONDepth}, {Jsonb: true}, {UTF8: true, Jsonb: true},
	{OneLine: true, Trimmed: true, NoLineSeparators: true, MaxDepth: jsonscan.EncodingJSONDepth - 1},
}

func TestScanAsReference(t *testing.T) {
	for _, c := range cases {
		for _, o := range optionSets {
			if got, want := o.Scan([]byte(c)), reference([]byte(c), o); got != want {
				t.Errorf("%+v.Scan(%.60q) = %v, the reference %v", o, c, got, want)
			}
		}
		if got, want := (jsonscan.Options{MaxDepth: jsonscan.EncodingJSONDepth}).Scan([]byte(c)) != jsonscan.Invalid, json.Valid([]byte(c)); got != want {
			t.Errorf("Scan(%.60q) with encoding/json's depth: %v, encoding/json.Valid %v", c, got, want)
		}
	}
}

// Every object and array counts towards the depth, an empty innermost one
// too; Valid limits the depth of a large document only, as encoding/json
// does (a small one got gjson's verdict, which has no limit).
func TestScanDepth(t *testing.T) {
	for _, depth := range []int{2, 3, 4, 9999, 10000, 10001, 100000} {
		for _, inner := range []string{"1", "[]", "{}"} {
			d := depth
			if inner != "1" {
				d-- // the empty container is the innermost level
			}
			v := []byte(strings.Repeat(`[{"a":`, d/2) + strings.Repeat("[", d%2) + inner + strings.Repeat("]", d%2) + strings.Repeat("}]", d/2))
			for _, max := range []int{-1, 3, 9999, 10000} {
				o := jsonscan.Options{MaxDepth: max}
				if got, want := o.Scan(v) != jsonscan.Invalid, max < 0 || depth <= max; got != want {
					t.Errorf("%d levels (innermost %s), at most %d: %v, want %v", depth, inner, max, got, want)
				}
				if got := o.Scan(v[1:]); got != jsonscan.Invalid {
					t.Errorf("%d levels (innermost %s), one bracket short: %v", depth, inner, got)
				}
			}
			want := len(v) <= 64<<10 && gjson.ValidBytes(v) || len(v) > 64<<10 && json.Valid(v)
			if got := jsonscan.Valid(v); got != want || got != (len(v) <= 64<<10 || depth <= 10000) {
				t.Errorf("Valid, %d levels (innermost %s, %d bytes): %v, want %v", depth, inner, len(v), got, want)
			}
		}
	}
}

// The 8-byte string scan sees a special byte at every alignment.
func TestScanStringAlignment(t *testing.T) {
	specials := []string{`"`, `\`, "\x00", "\x1f", "\x7f", "\x80", "é", "\u2028", `\n`, `\u0041`, `\u0000`, `\udc00`, "\xff", " "}
	for _, sp := range specials {
		for pos := 0; pos < 24; pos++ {
			v := []byte(`["` + strings.Repeat("a", pos) + sp + strings.Repeat("b", 24-pos) + `"]`)
			for _, o := range optionSets {
				if got, want := o.Scan(v), reference(v, o); got != want {
					t.Errorf("%+v.Scan(%q) = %v, the reference %v", o, v, got, want)
				}
			}
		}
	}
}

// Every input gets the reference's verdict under every combination of
// options the flags choose.
func FuzzScan(f *testing.F) {
	for i, c := range cases {
		if len(c) < 1000 {
			f.Add([]byte(c), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, v []byte, flags uint8) {
		o := jsonscan.Options{
			OneLine: flags&1 != 0, Trimmed: flags&2 != 0, UTF8: flags&4 != 0, NoLineSeparators: flags&8 != 0, Jsonb: flags&16 != 0,
			MaxDepth: []int{0, -1, 2, jsonscan.EncodingJSONDepth}[flags>>5&3],
		}
		if got, want := o.Scan(v), reference(v, o); got != want {
			t.Fatalf("%+v.Scan(%q) = %v, the reference %v", o, v, got, want)
		}
		if got, want := jsonscan.Valid(v), len(v) <= 64<<10 && gjson.ValidBytes(v) || len(v) > 64<<10 && json.Valid(v); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", v, got, want)
		}
	})
}

// FloatHolds tells a decimal a float holds as written from one it rounds.
func TestFloatHolds(t *testing.T) {
	for _, c := range []struct {
		s    string
		bits int
		want bool
	}{
		{"19.99", 64, true}, {"1.50", 64, true}, {"2E+3", 64, true}, {"-0.0", 64, true}, {"5e-324", 64, true},
		{"0.0999999999999999999", 64, false}, {"92233720368547758071", 64, false}, {"1e400", 64, false},
		{"0.1", 32, true}, {"16777217", 32, false},
	} {
		f, _ := strconv.ParseFloat(c.s, c.bits)
		if got := jsonscan.FloatHolds(c.s, f, c.bits); got != c.want {
			t.Errorf("FloatHolds(%s, %d bits) = %v, want %v", c.s, c.bits, got, c.want)
		}
	}
}
