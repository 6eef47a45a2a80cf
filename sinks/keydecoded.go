package sinks

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/replay-tool/replay/internal/record"
)

// decodedKey is r's key as a key template sees it when the decode stage
// decoded it from the Confluent wire format (plan decode.key): the decoded
// JSON parsed like .Value (numbers as json.Number), so that {{ .Key.id }}
// reads a field; an object or array prints, as {{ .Key }}, as one line of
// JSON with object fields sorted by name. ok is false when r's key was not
// decoded (.Key is then the key's bytes as a string).
func decodedKey(r *record.Record) (v any, ok bool) {
	d := r.Note.DecodedOrNil()
	if d == nil || d.Key == nil {
		return nil, false
	}
	switch x := record.ParseValue(d.Key).(type) {
	case map[string]any:
		return jsonObject(x), true
	case []any:
		return jsonArray(x), true
	default:
		return x, true
	}
}

// jsonObject is a decoded key's object: a map for field access, printed as
// JSON.
type jsonObject map[string]any

// String is o as one line of JSON, fields sorted by name, numbers as
// written.
func (o jsonObject) String() string { return compactJSON(map[string]any(o)) }

// jsonArray is a decoded key's array, printed as JSON.
type jsonArray []any

// String is a as one line of JSON.
func (a jsonArray) String() string { return compactJSON([]any(a)) }

// compactJSON is v (parsed JSON) as one line of JSON, without escaping
// HTML characters.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "" // parsed JSON always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}
