// Package record holds the Kafka record as replay hands it from the reader
// through the record pipeline (decode, filter, mapping, key) to the sinks,
// with what replay learns about it on the way. It imports nothing of
// replay but the JSON scanner (internal/jsonscan).
package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/jsonscan"
)

// Record is one Kafka record.
type Record struct {
	Topic     string
	Partition int32
	// TimestampType says which time Time is.
	TimestampType TimestampType
	Offset        int64
	// Time is the record timestamp, with millisecond precision: the
	// producer's (CreateTime), or, in a LOG_APPEND_TIME batch, the batch's
	// MaxTimestamp, the broker's append time (KIP-32).
	Time time.Time
	// Key is nil when the record has no key.
	Key []byte
	// Value is nil for a tombstone.
	Value   []byte
	Headers []Header

	// IdemKey is the idempotency key the pipeline's key stage rendered from
	// the sink's key template, for a sink that writes keys; "" stands for
	// the default key, the record's coordinates. Sinks read it through
	// IdempotencyKey or AppendIdempotencyKey.
	IdemKey string
	// Note is what replay learned about the record on its way: its decoded
	// value and, for a dead letter, why it could not be processed. nil on
	// the hot path.
	Note *Note
}

// TimestampType is the timestamp type of a record's batch (KIP-32), the
// attributes' timestampType bit.
type TimestampType uint8

const (
	// CreateTime: the timestamp is the producer's.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker stamped the batch with its append time
	// (the topic's message.timestamp.type is LogAppendTime).
	LogAppendTime TimestampType = 1
)

// String returns Kafka's name of t: "CreateTime" or "LogAppendTime".
func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// ParseTimestampType reads Kafka's name of a timestamp type, as String
// writes it; "" is CreateTime. Any other name is an error saying which
// names there are.
func ParseTimestampType(s string) (TimestampType, error) {
	switch s {
	case "", "CreateTime":
		return CreateTime, nil
	case "LogAppendTime":
		return LogAppendTime, nil
	}
	return CreateTime, fmt.Errorf("%q is neither CreateTime nor LogAppendTime", s)
}

// Header is one record header (KIP-82). Keys may repeat.
type Header struct {
	Key   string
	Value []byte
}

// Note is what replay learned about a record on its way to a sink.
type Note struct {
	// Value is the decoded value, valid when Parsed: Record.Value as
	// ParseValue returns it, parsed once by the first stage of the pipeline
	// that needs it (the filter, the key template) for the stages after it.
	// A stage that changes Record.Value sets Value again or clears Parsed.
	Value  any
	Parsed bool
	// Reason says why a dead letter could not be processed ("" otherwise).
	Reason string
	// Decoded holds the key and value the decode stage decoded from the
	// Confluent wire format; nil when it decoded neither.
	Decoded *Decoded
	// Original is the value as read when the mapping stage replaced
	// Record.Value with the mapped value; nil when the record was not
	// mapped. Sinks that keep a record's bytes (a database's value_bytes)
	// write it. A mapped record keeps Decoded, but its value is Value.
	Original []byte
}

// Decoded is a record's key and value decoded from the Confluent wire
// format by their writer's schema. Record.Key and Record.Value keep the
// bytes as Kafka holds them.
type Decoded struct {
	// Value is the decoded value, one line of JSON; nil when the value was
	// not decoded (a tombstone, or decode.value: none). ValueSchemaID is
	// the schema id it was decoded by.
	Value         []byte
	ValueSchemaID int32
	// Key and KeySchemaID are the same for the key.
	Key         []byte
	KeySchemaID int32
	// ValueClean and KeyClean report that Value and Key were written by
	// replay's own JSON writer (decode.Decoded.Clean): one JSON document,
	// valid UTF-8, U+2028 and U+2029 escaped. A writer may copy them
	// without checking them again.
	ValueClean, KeyClean bool
}

// DecodedOrNil returns n.Decoded; nil when n is nil.
func (n *Note) DecodedOrNil() *Decoded {
	if n == nil {
		return nil
	}
	return n.Decoded
}

// Mapped reports whether the mapping stage replaced r's value.
func (r *Record) Mapped() bool { return r.Note != nil && r.Note.Original != nil }

// OriginalValue returns the value as read from Kafka: Note.Original for a
// mapped record, else Value.
func (r *Record) OriginalValue() []byte {
	if r.Mapped() {
		return r.Note.Original
	}
	return r.Value
}

// JSONValue returns the value as the pipeline's later stages read it as
// JSON: the mapped value (Value) once the mapping stage replaced it, else
// the decoded value when the decode stage decoded it, else Value.
func (r *Record) JSONValue() []byte {
	if r.Mapped() {
		return r.Value
	}
	if r.Note != nil && r.Note.Decoded != nil && r.Note.Decoded.Value != nil {
		return r.Note.Decoded.Value
	}
	return r.Value
}

// ParsedValue returns the value as the filter and the key template see it
// (ParseValue of JSONValue), parsing it unless the filter already did.
func (r *Record) ParsedValue() any {
	if r.Note != nil && r.Note.Parsed {
		return r.Note.Value
	}
	if d := r.Note.DecodedOrNil(); d != nil && d.ValueClean && d.Value != nil && !r.Mapped() {
		return parseJSON(d.Value) // one JSON document by construction
	}
	return ParseValue(r.JSONValue())
}

// ParseValue returns v parsed as JSON, with numbers kept as json.Number so
// an id renders as written (as float64, 1000000 rendered "1e+06" and ids
// above 2^53 collided), or the raw string when v is not one JSON document
// or has a string that is not valid Unicode (decoded, its bytes that are
// not UTF-8 and its lone surrogates would all read as U+FFFD).
func ParseValue(v []byte) any {
	if !jsonscan.ValidUnicode(v) { // the cheap pass; Decode below would accept a valid prefix
		return string(v)
	}
	return parseJSON(v)
}

// parseJSON is ParseValue of v known to be one JSON document.
func parseJSON(v []byte) any {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return string(v)
	}
	return x
}

// LastHeader returns the value of r's last header named name, and
// whether r has one.
func (r *Record) LastHeader(name string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == name {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// IdempotencyKey returns r's idempotency key: IdemKey, or the default key
// "<topic>/<partition>/<offset>" when IdemKey is "".
func (r *Record) IdempotencyKey() string {
	if r.IdemKey != "" {
		return r.IdemKey
	}
	return string(AppendDefaultKey(make([]byte, 0, len(r.Topic)+24), r))
}

// AppendIdempotencyKey appends r's idempotency key (IdempotencyKey) to b.
func (r *Record) AppendIdempotencyKey(b []byte) []byte {
	if r.IdemKey != "" {
		return append(b, r.IdemKey...)
	}
	return AppendDefaultKey(b, r)
}

// AppendDefaultKey appends the default key "<topic>/<partition>/<offset>"
// to b: the record's coordinates, unique in a topic, so replaying a record
// twice writes the same row.
func AppendDefaultKey(b []byte, r *Record) []byte {
	b = append(b, r.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, r.Offset, 10)
}

// DeadLetter returns r marked as a dead letter: a record that could not be
// processed, and why. A dead letter is the record as read: a mapped
// record gets its original value back (so that a later plan replays the
// dead letters through the same mapping). The parsed value, when there is
// one and the value was not mapped, is kept; the idempotency key is not
// (the dead-letter sink's key stage computes its own).
func DeadLetter(r Record, reason string) Record {
	r.IdemKey = ""
	n := Note{Reason: reason}
	switch {
	case r.Mapped():
		r.Value, n.Decoded = r.Note.Original, r.Note.Decoded
	case r.Note != nil:
		n.Value, n.Parsed, n.Decoded = r.Note.Value, r.Note.Parsed, r.Note.Decoded
	}
	r.Note = &n
	return r
}

// DeadLetterReason returns why r could not be processed; "" unless r was
// made by DeadLetter.
func (r *Record) DeadLetterReason() string {
	if r.Note == nil {
		return ""
	}
	return r.Note.Reason
}

// Error reports a record that cannot be processed (a poison record): a sink
// rejected it, the filter or the key template failed on it. Err says why.
type Error struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

// MaxErrorText bounds the text of an Error's cause: a sink that rejects a
// row may quote the whole row (PostgreSQL's "Failing row contains ..."),
// and a record of megabytes must not become a log line, a summary or a
// dead letter's reason of that size. The coordinates name the record.
const MaxErrorText = 512

func (e *Error) Error() string {
	return fmt.Sprintf("record %s/%d@%d: %s", e.Topic, e.Partition, e.Offset, Excerpt(fmt.Sprint(e.Err), MaxErrorText))
}

// Excerpt returns s cut to at most n bytes (at a UTF-8 boundary) followed by
// how many bytes were left out; s itself when it is not longer.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

func (e *Error) Unwrap() error { return e.Err }

// NewError returns err as the failure of record r.
func NewError(r *Record, err error) *Error {
	return &Error{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}
}
