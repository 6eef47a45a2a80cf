// Package encode holds the encodings every sink driver may use: JSON lines,
// the timestamp layout, SQL identifier quoting, and the evaluation of a
// plan's column mapping into cell values. It knows no driver: a driver
// converts the neutral values to its own types.
package encode

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
	"github.com/replay-tool/replay/internal/record"
)

// AppendJSONL appends r as one line of newline-delimited JSON, its value in
// the auto format (see ValueFormat):
//
//	{"topic":"orders","partition":3,"offset":1200,"timestamp":"2026-11-03T10:00:00.123Z",
//	 "timestamp_type":"CreateTime","key":"k-1","value":{"id":1},
//	 "headers":[{"key":"trace","value":"abc"}]}
//
// timestamp is RFC 3339 in UTC with milliseconds; timestamp_type is
// CreateTime (the producer's time) or LogAppendTime (the broker's append
// time, KIP-32). The encoding is lossless (DecodeJSONL gives back the
// record's bytes):
//
//   - key: null when absent, a JSON string when it is UTF-8, else standard
//     base64 in a string followed by "key_encoding":"base64".
//   - value: null for a tombstone; the value itself when it is one line of
//     JSON that reads back byte for byte (UTF-8, no surrounding white space,
//     no U+2028/U+2029), followed by "value_encoding":"json" when that JSON
//     is a string or the literal null; else a JSON string when it is UTF-8;
//     else base64 followed by "value_encoding":"base64".
//   - headers: in record order, each {"key":...,"value":...} with the value
//     as a key is written (its own "value_encoding":"base64"; a header key
//     that is not UTF-8 gets "key_encoding":"base64").
//
// A key or value the pipeline's decode stage decoded from the Confluent
// wire format (record.Decoded) is written as its decoded JSON, followed by
// "key_schema_id":N or "value_schema_id":N, the schema id it was decoded
// by; such a line does not give back the record's bytes.
//
// A dead letter (see DeadLetter) also has error, source_topic,
// source_partition and source_offset. The encoding is deterministic: the
// same record always yields the same bytes.
func AppendJSONL(b []byte, r *record.Record) []byte { return appendJSONL(b, r, FormatAuto) }

func appendJSONL(b []byte, r *record.Record, f ValueFormat) []byte {
	b = append(b, `{"topic":`...)
	b = AppendJSONString(b, r.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"timestamp":"`...)
	b = AppendTimestamp(b, r.Time)
	if r.TimestampType == record.LogAppendTime {
		b = append(b, `","timestamp_type":"LogAppendTime","key":`...)
	} else {
		b = append(b, `","timestamp_type":"CreateTime","key":`...)
	}
	d := r.Note.DecodedOrNil()
	if d != nil && d.Key != nil {
		b = appendDecoded(b, d.Key, d.KeyClean, "key_schema_id", d.KeySchemaID)
	} else {
		b = appendTextOrBase64(b, r.Key, "key_encoding")
	}
	if d != nil && d.Value != nil && !r.Mapped() { // a mapped value is r.Value
		b = append(b, `,"value":`...)
		b = appendDecoded(b, d.Value, d.ValueClean, "value_schema_id", d.ValueSchemaID)
	} else {
		b = appendValue(b, r.Value, f)
	}
	b = AppendHeadersJSON(append(b, `,"headers":`...), r.Headers)
	if r.Note != nil && r.Note.Reason != "" {
		b = AppendDeadLetterFields(b, r)
	}
	return append(b, "}\n"...)
}

// appendDecoded appends a decoded key or value, cleaned unless clean, and
// ,"<idField>":id after it.
func appendDecoded(b, doc []byte, clean bool, idField string, id int32) []byte {
	if clean {
		b = append(b, doc...)
	} else {
		b = appendCleanJSON(b, doc)
	}
	b = append(b, `,"`...)
	b = append(b, idField...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, int64(id), 10)
}

// IsOneLineJSON reports whether v is a single valid JSON document (see
// jsonscan.Valid) with no raw line break (which would split a JSONL line).
func IsOneLineJSON(v []byte) bool {
	return jsonscan.Options{OneLine: true}.Scan(v) != jsonscan.Invalid
}

// embeddable reports whether v, written verbatim into a JSONL line, reads
// back as the same bytes: one JSON document without surrounding white
// space, raw line breaks, invalid UTF-8 or U+2028/U+2029 (which some JSONL
// readers split on), nested at most maxDepth levels.
func embeddable(v []byte) bool { return embeddedKind(v) != jsonscan.Invalid }

// embeddedKind is the kind of v's value when it is embeddable, else
// jsonscan.Invalid.
func embeddedKind(v []byte) jsonscan.Kind {
	return jsonscan.Options{OneLine: true, Trimmed: true, NoLineSeparators: true, MaxDepth: maxDepth}.Scan(v)
}

// maxDepth is the deepest nesting embeddable accepts: one below
// encoding/json's limit, as the line's own object is one more level.
const maxDepth = jsonscan.EncodingJSONDepth - 1

// appendCleanJSON appends the valid JSON document v with each invalid UTF-8
// byte (only possible inside its strings) replaced by \ufffd and
// U+2028/U+2029 escaped: valid UTF-8 JSON with the same meaning.
func appendCleanJSON(b, v []byte) []byte {
	if clean(v) {
		return append(b, v...)
	}
	return appendEscaped(b, v)
}

// cleanJSON is appendCleanJSON(nil, v), but v itself when nothing in it
// needs escaping.
func cleanJSON(v []byte) []byte {
	if clean(v) {
		return v
	}
	return appendEscaped(nil, v)
}

// clean reports whether the JSON text v needs no escaping: valid UTF-8
// without U+2028 or U+2029 (which start with 0xE2).
func clean(v []byte) bool {
	return bytes.IndexByte(v, 0xe2) < 0 && utf8.Valid(v)
}

// appendEscaped appends v to b with invalid UTF-8, U+2028 and U+2029
// escaped.
func appendEscaped(b, v []byte) []byte {
	start := 0
	for i := 0; i < len(v); {
		if v[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(v[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = `\ufffd`
		case r == '\u2028':
			esc = `\u2028`
		case r == '\u2029':
			esc = `\u2029`
		default:
			i += size
			continue
		}
		b = append(append(b, v[start:i]...), esc...)
		i += size
		start = i
	}
	return append(b, v[start:]...)
}

// AppendJSONString appends s as a JSON string (see AppendJSONBytes).
func AppendJSONString(b []byte, s string) []byte { return AppendJSONBytes(b, []byte(s)) }

// AppendJSONBytes appends s as a JSON string, escaping as encoding/json does
// (without its HTML escaping) and replacing invalid UTF-8 with U+FFFD
// (jsonscan.AppendString).
func AppendJSONBytes(b, s []byte) []byte { return jsonscan.AppendString(b, s) }

// AppendTimestamp appends t in UTC as 2006-01-02T15:04:05.000Z, what the
// layout "2006-01-02T15:04:05.000Z07:00" gives for UTC, without the layout
// interpretation of Time.AppendFormat (years outside 0..9999 still use it).
func AppendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, min, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(b,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// TimeLayout is RFC 3339 with milliseconds, the one timestamp layout of
// every sink: in UTC it ends in Z (2026-11-03T10:00:00.123Z), so text order
// is time order.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendDeadLetterFields appends the fields of a dead letter's JSON line
// after the record's own: ,"error":...,"source_topic":...,
// "source_partition":...,"source_offset":...
func AppendDeadLetterFields(b []byte, r *record.Record) []byte {
	b = append(b, `,"error":`...)
	b = AppendJSONString(b, r.Note.Reason)
	b = append(b, `,"source_topic":`...)
	b = AppendJSONString(b, r.Topic)
	b = append(b, `,"source_partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"source_offset":`...)
	return strconv.AppendInt(b, r.Offset, 10)
}
