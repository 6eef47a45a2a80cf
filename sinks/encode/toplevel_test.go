package encode

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/jsonscan"
)

// gjsonText is what Cells.Text said of a value.<path> column before the
// top level was indexed: gjson's answer for path.
func gjsonText(doc []byte, path string) (string, bool) {
	res := gjson.GetBytes(doc, path)
	switch res.Type {
	case gjson.Null:
		return "", false
	case gjson.String:
		return res.Str, true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	}
	return res.Raw, true
}

var topLevelDocs = []string{
	`{"id":"ord-1","customer":"c","status":"paid","amount":863.68,"items":3,"shipping":{"country":"DE","zip":"10934"},"tags":["a","b"],"note":"x"}`,
	` { "a" : 1 , "b":[1,{"c":"]}"}], "c":"q\"uo\\\"te", "d":null, "e":true, "f":false, "g":-0.5e10 } `,
	`{"dup":1,"dup":2,"x":{"dup":3}}`,
	`{"esc":"\u00e9\n","k\u0065y":1,"key":2}`,
	`{"":1,"a-b":2,"a_b":3,"0":4}`,
	`{"s":"\\","t":"\\\\\"","u":"end"}`,
	`[1,2,3]`, `"str"`, `12`, `{}`, `{"a":{}}`, `{"a":[]}`,
}

func TestTopLevelAsGjson(t *testing.T) {
	paths := []string{"id", "customer", "amount", "shipping", "tags", "note", "a", "b", "c", "d", "e", "f", "g", "dup", "x", "esc", "key", "a-b", "a_b", "0", "s", "t", "u", "missing"}
	for _, doc := range topLevelDocs {
		b := []byte(doc)
		if !jsonscan.Valid(b) {
			t.Fatalf("not valid JSON: %s", doc)
		}
		for _, p := range paths {
			for _, alias := range []bool{false, true} {
				cs := Cells{doc: b, parsed: true, Alias: alias}
				got, gok := cs.path(p)
				want, wok := gjsonText(b, p)
				if got != want || gok != wok {
					t.Errorf("%s, path %s, alias %v: %q %v, gjson %q %v", doc, p, alias, got, gok, want, wok)
				}
			}
		}
	}
}

func FuzzTopLevelAsGjson(f *testing.F) {
	for _, doc := range topLevelDocs {
		f.Add([]byte(doc), "a")
	}
	f.Fuzz(func(t *testing.T, doc []byte, p string) {
		if !jsonscan.Valid(doc) || !SimplePath(p) {
			return
		}
		doc = cleanJSON(doc)
		cs := Cells{doc: doc, parsed: true, Alias: len(p)%2 == 0}
		got, gok := cs.path(p)
		want, wok := gjsonText(doc, p)
		if got != want || gok != wok {
			t.Fatalf("%q, path %q: %q %v, gjson %q %v", doc, p, got, gok, want, wok)
		}
	})
}
