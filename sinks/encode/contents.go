package encode

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
)

// ValueFormat is how a text sink writes a record's value (the plan's
// sink.value_format): auto (the zero value), json, text or base64.
type ValueFormat string

// The value formats. Every form is lossless: DecodeJSONL gives back the
// original bytes.
const (
	// FormatAuto embeds a JSON value as JSON, writes other UTF-8 text as a
	// JSON string, and any other bytes as base64 (value_encoding "base64").
	FormatAuto ValueFormat = "auto"
	// FormatJSON embeds every value as JSON; a value that cannot be
	// embedded byte for byte is a bad record (ErrNotJSON).
	FormatJSON ValueFormat = "json"
	// FormatText writes every value as a JSON string; a value that is not
	// UTF-8 is a bad record (ErrNotText).
	FormatText ValueFormat = "text"
	// FormatBase64 writes every value as standard base64 (RFC 4648, with
	// padding), marked value_encoding "base64".
	FormatBase64 ValueFormat = "base64"
)

// The encodings a line names in value_encoding or key_encoding. A field
// without one is JSON (an object, array, number, true or false), text (a
// JSON string: its UTF-8 bytes) or null (a tombstone, a null key).
const (
	// EncodingBase64 marks a JSON string holding the bytes in standard base64.
	EncodingBase64 = "base64"
	// EncodingJSON marks a value embedded as JSON whose JSON text is a
	// string or the literal null, which without the mark would read as text
	// or a tombstone.
	EncodingJSON = "json"
)

// Errors of a value that the forced value format cannot write; a sink
// returns them wrapped in a *record.Error, so they follow on_error.
var (
	ErrNotJSON = errors.New("value_format json: the value is not one line of JSON that can be embedded byte for byte " +
		"(it is not JSON, or it has surrounding white space, a line break, U+2028/U+2029 or bytes that are not UTF-8)")
	ErrNotText = errors.New("value_format text: the value is not UTF-8 text")
)

// CheckValueFormat returns the *record.Error (wrapping ErrNotJSON or
// ErrNotText) of a record whose value format f cannot write, else nil. A
// sink checks a whole batch before it writes any of it.
func CheckValueFormat(r *record.Record, f ValueFormat) error {
	if r.Value == nil || r.Mapped() || r.Note.DecodedOrNil() != nil && r.Note.Decoded.Value != nil {
		return nil // a tombstone, a mapped or a decoded value: JSON
	}
	switch f {
	case FormatJSON:
		if !embeddable(r.Value) {
			return record.NewError(r, ErrNotJSON)
		}
	case FormatText:
		if !utf8.Valid(r.Value) {
			return record.NewError(r, ErrNotText)
		}
	}
	return nil
}

// CheckBatch is CheckValueFormat of each record of batch: the first error.
func CheckBatch(batch []record.Record, f ValueFormat) error {
	if f != FormatJSON && f != FormatText {
		return nil
	}
	for i := range batch {
		if err := CheckValueFormat(&batch[i], f); err != nil {
			return err
		}
	}
	return nil
}

// AppendJSONLChecked is AppendJSONL with the value written in format f
// ("" is auto), for a record CheckValueFormat accepted.
func AppendJSONLChecked(b []byte, r *record.Record, f ValueFormat) []byte {
	if f == "" {
		f = FormatAuto
	}
	return appendJSONL(b, r, f)
}

// appendValue appends `,"value":...` (and its value_encoding) in format f.
func appendValue(b, v []byte, f ValueFormat) []byte {
	b = append(b, `,"value":`...)
	switch {
	case v == nil:
		return append(b, "null"...)
	case f == FormatBase64:
		return appendBase64(b, v, "value_encoding")
	case f == FormatText:
		return AppendJSONBytes(b, v)
	}
	switch embeddedKind(v) {
	case jsonscan.Invalid:
		return appendTextOrBase64(b, v, "value_encoding")
	case jsonscan.String, jsonscan.Null:
		return append(append(b, v...), `,"value_encoding":"json"`...)
	}
	return append(b, v...)
}

// appendTextOrBase64 appends v as a JSON string when it is UTF-8, else as
// base64 followed by ,"<mark>":"base64"; nil is null.
func appendTextOrBase64(b, v []byte, mark string) []byte {
	switch {
	case v == nil:
		return append(b, "null"...)
	case utf8.Valid(v):
		return AppendJSONBytes(b, v)
	}
	return appendBase64(b, v, mark)
}

func appendBase64(b, v []byte, mark string) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	b = append(b, `","`...)
	b = append(b, mark...)
	return append(b, `":"base64"`...)
}

// AppendHeadersJSON appends hs as the "headers" array of a JSONL line
// (AppendJSONL): [{"key":"trace","value":"abc"}, ...] in record order,
// repeated keys kept, a null value as null, a value (or key) that is not
// UTF-8 as standard base64 marked "value_encoding" ("key_encoding"):
// "base64". DecodeJSONL (DecodeHeadersJSON) reads it back to the original
// bytes.
func AppendHeadersJSON(b []byte, hs []record.Header) []byte {
	return appendHeadersJSON(b, hs, false)
}

// AppendHeadersJSONB is AppendHeadersJSON for a PostgreSQL jsonb column,
// whose strings cannot hold the NUL character: a key or value holding a
// NUL byte is base64 too. DecodeHeadersJSON reads it back the same way.
func AppendHeadersJSONB(b []byte, hs []record.Header) []byte {
	return appendHeadersJSON(b, hs, true)
}

// appendHeadersJSON writes a key or value as a JSON string where it is
// UTF-8 (and, for jsonb, holds no NUL), and as marked base64 otherwise.
func appendHeadersJSON(b []byte, hs []record.Header, jsonb bool) []byte {
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		if utf8.ValidString(h.Key) && !(jsonb && strings.IndexByte(h.Key, 0) >= 0) {
			b = AppendJSONString(b, h.Key)
		} else {
			b = appendBase64(b, []byte(h.Key), "key_encoding")
		}
		b = append(b, `,"value":`...)
		switch {
		case h.Value == nil:
			b = append(b, "null"...)
		case utf8.Valid(h.Value) && !(jsonb && bytes.IndexByte(h.Value, 0) >= 0):
			b = AppendJSONBytes(b, h.Value)
		default:
			b = appendBase64(b, h.Value, "value_encoding")
		}
		b = append(b, '}')
	}
	return append(b, ']')
}
