package encode

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// embeddableReference is embeddable's definition, spelt out with the
// standard library: one document encoding/json.Valid accepts, also as the
// value of an object (the line: encoding/json refuses more than 10000
// levels of nesting), no surrounding white space, no raw line break,
// UTF-8, no U+2028/U+2029.
func embeddableReference(v []byte) bool {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	return len(v) > 0 && !space(v[0]) && !space(v[len(v)-1]) &&
		!bytes.ContainsAny(v, "\n\r\u2028\u2029") && utf8.Valid(v) && json.Valid(v) &&
		json.Valid(append(append([]byte(`{"value":`), v...), '}'))
}

var embeddableCases = []struct {
	v    string
	want bool
}{
	{`{"id":"ord-1","amount":379.50,"items":4,"ok":true,"x":null,"s":{"a":[1,2,{"b":false}]}}`, true},
	{`[]`, true}, {`{}`, true}, {`[ ]`, true}, {"{ \t}", true}, {`"x"`, true}, {`0`, true}, {`-0.5e+10`, true},
	{`1E5`, true}, {`true`, true}, {`null`, true}, {`"\u00e9\n\"\\\/\b\f\r\t"`, true}, {`"é ü 日本 🎉"`, true},
	{`{"a" : 1 , "b":[ 1 , 2 ] }`, true}, {`[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]`, true},
	{``, false}, {` 1`, false}, {`1 `, false}, {"\t{}", false}, {"{}\n", false}, {"{\n}", false}, {"[1,\r2]", false},
	{`{`, false}, {`}`, false}, {`[1,]`, false}, {`{"a":1,}`, false}, {`{"a"}`, false}, {`{"a":}`, false}, {`{1:2}`, false},
	{`[1 2]`, false}, {`{"a":1 "b":2}`, false}, {`[}`, false}, {`{]`, false}, {`[1]]`, false}, {`{}{}`, false}, {`1 2`, false},
	{`01`, false}, {`-`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`1e+`, false}, {`+1`, false}, {`0x10`, false},
	{`NaN`, false}, {`tru`, false}, {`truex`, false}, {`nul`, false}, {`fals`, false}, {`True`, false},
	{`"abc`, false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false}, {`"a` + "\x01" + `b"`, false}, {`"\`, false},
	{"\"tab\tinside\"", false}, {"\"\xff\"", false}, {"\"\xe2\x80\xa8\"", false}, {"\"\xe2\x80\xa9\"", false},
	{"\"\xe2\x80\"", false}, {"\"\xed\xa0\x80\"", false}, {"\"\xc0\xaf\"", false}, {"\xef\xbb\xbf{}", false},
	{`"12345678"`, true}, {`"1234567\"`, false}, {`"123456789012345\u0041"`, true}, {`"12345678901234` + "\x7f" + `"`, true},
}

func TestEmbeddableJSON(t *testing.T) {
	for _, c := range embeddableCases {
		if got := embeddable([]byte(c.v)); got != c.want {
			t.Errorf("embeddable(%q) = %v, want %v", c.v, got, c.want)
		}
		if ref := embeddableReference([]byte(c.v)); ref != c.want {
			t.Errorf("case %q: the reference says %v, the case %v", c.v, ref, c.want)
		}
	}
	// Every object and array counts, an empty innermost one too.
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1, 10000, 100000} {
		for _, inner := range []string{"1", "[]", "{}"} {
			d := depth
			if inner != "1" {
				d-- // the empty container is the innermost level
			}
			v := []byte(strings.Repeat(`[{"a":`, d/2) + strings.Repeat("[", d%2) + inner + strings.Repeat("]", d%2) + strings.Repeat("}]", d/2))
			if got, want := embeddable(v), embeddableReference(v); got != want || got != (depth <= maxDepth) {
				t.Errorf("%d levels of nesting (innermost %s): %v, the reference %v", depth, inner, got, want)
			}
			if embeddable(v[1:]) || embeddable(v[:len(v)-1]) {
				t.Errorf("%d levels of nesting (innermost %s), one bracket short: embeddable", depth, inner)
			}
		}
	}
}

// Every input gets the reference's verdict; the 8-byte string scan is
// exercised at every alignment by shifting a special byte through a long
// string.
func FuzzEmbeddableJSON(f *testing.F) {
	for _, c := range embeddableCases {
		f.Add([]byte(c.v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if got, want := embeddable(v), embeddableReference(v); got != want {
			t.Fatalf("embeddable(%q) = %v, the reference %v", v, got, want)
		}
	})
}

func TestEmbeddableJSONStringScanAlignment(t *testing.T) {
	specials := []string{`"`, `\`, "\x00", "\x1f", "\x7f", "\x80", "é", "\u2028", `\n`, `\u0041`, "\xff", " "}
	for _, sp := range specials {
		for pos := 0; pos < 24; pos++ {
			v := []byte(`["` + strings.Repeat("a", pos) + sp + strings.Repeat("b", 24-pos) + `"]`)
			if got, want := embeddable(v), embeddableReference(v); got != want {
				t.Errorf("embeddable(%q) = %v, the reference %v", v, got, want)
			}
		}
	}
}

// BenchmarkEmbeddable compares the one-pass scan with the checks it
// replaced (gjson's validator plus the line-break, U+2028 and UTF-8
// passes) on a typical order document.
func BenchmarkEmbeddable(b *testing.B) {
	doc := []byte(`{"id":"ord-1","customer":"cus-27626","status":"paid","amount":379.50,"currency":"JPY","items":4,"created_at":"2026-11-30T22:04:02.086Z","channel":"web","shipping":{"country":"DE","city":"Berlin","zip":"10434"},"fx_rate":1.135484,"note":"replay demo order"}`)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !embeddable(doc) {
				b.Fatal("not embeddable")
			}
		}
	})
	b.Run("scan-cyrillic", func(b *testing.B) { // strings of another script: the 8-byte skip must not cost them
		doc := []byte(`{"id":"ord-1","note":"Привет, мир! Это повтор окна топика","city":"Москва","tag":"测试"}`)
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !embeddable(doc) {
				b.Fatal("not embeddable")
			}
		}
	})
	b.Run("gjson+passes", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if bytes.IndexByte(doc, '\n') >= 0 || bytes.IndexByte(doc, '\r') >= 0 || !gjson.ValidBytes(doc) ||
				bytes.IndexByte(doc, 0xe2) >= 0 || !utf8.Valid(doc) {
				b.Fatal("not embeddable")
			}
		}
	})
}

// AppendJSONBytes skips plain ASCII 8 bytes at a time: a byte to escape
// (or a rune to check) at any position of a word is still seen, and the
// string reads back as the input (each invalid UTF-8 byte as U+FFFD).
func TestAppendJSONBytesAlignment(t *testing.T) {
	specials := []string{`"`, `\`, "\x00", "\n", "\x1f", "\x7f", "é", "日", "🎉", "\u2028", "\u2029", "\xff", "\xe2\x80", "<&>"}
	for _, sp := range specials {
		for pos := 0; pos < 20; pos++ {
			s := strings.Repeat("a", pos) + sp + strings.Repeat("b", 19-pos)
			out := AppendJSONBytes(nil, []byte(s))
			var back string
			if err := json.Unmarshal(out, &back); err != nil || !utf8.Valid(out) || bytes.ContainsAny(out, "\n\u2028\u2029") {
				t.Fatalf("AppendJSONBytes(%q) = %q: not one line of valid JSON (%v)", s, out, err)
			}
			var want strings.Builder
			for i := 0; i < len(s); {
				r, size := utf8.DecodeRuneInString(s[i:])
				want.WriteRune(r) // RuneError for an invalid byte
				i += size
			}
			if back != want.String() {
				t.Errorf("AppendJSONBytes(%q) reads back as %q, want %q", s, back, want.String())
			}
		}
	}
}

// BenchmarkAppendJSONBytes writes a string of plain ASCII and one of
// Cyrillic and Chinese text.
func BenchmarkAppendJSONBytes(b *testing.B) {
	for name, s := range map[string]string{
		"ascii":    `replay demo order with a somewhat longer note, "quoted" and plain`,
		"cyrillic": `Привет, мир! Это повтор окна топика Кафки с записью каждого сообщения. 你好世界，这是一个测试。`,
	} {
		b.Run(name, func(b *testing.B) {
			in := []byte(s)
			b.SetBytes(int64(len(in)))
			var out []byte
			for b.Loop() {
				out = AppendJSONBytes(out[:0], in)
			}
		})
	}
}
