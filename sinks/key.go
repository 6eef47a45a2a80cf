package sinks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// Keyer computes the idempotency key of a record: the identity under which
// a sink stores it, so a re-delivered record overwrites itself.
type Keyer struct {
	tmpl        *template.Template
	fast        []keyPart // see fastParts; nil: always Execute
	wantValue   bool
	wantHeaders bool                          // the template reads .Headers, a map per record
	field       func(r *record.Record) string // the template is one field of recordFields
}

// NewKeyer compiles a key template (Go text/template). The template sees
// .Topic, .Partition, .Offset, .Timestamp (time.Time), .Key (string; the
// decoded key for a record whose key was decoded, see decodedKey),
// .Value (the value parsed as JSON, numbers as json.Number, or the raw
// string when it is not JSON) and .Headers (map of header key to its last
// value). An empty template means the default key
// "<topic>/<partition>/<offset>", unique per record.
func NewKeyer(text string) (*Keyer, error) {
	if strings.TrimSpace(text) == "" {
		return &Keyer{}, nil
	}
	t, err := template.New("key").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	k := &Keyer{tmpl: t, fast: fastParts(t), wantValue: strings.Contains(text, ".Value"), wantHeaders: strings.Contains(text, ".Headers")}
	if len(k.fast) == 1 && k.fast[0].field != "" {
		k.field = recordFields[k.fast[0].field]
	}
	return k, nil
}

// recordFields render the record fields a key template prints plainly.
var recordFields = map[string]func(r *record.Record) string{
	"Key":       func(r *record.Record) string { return string(r.Key) },
	"Topic":     func(r *record.Record) string { return r.Topic },
	"Partition": func(r *record.Record) string { return strconv.FormatInt(int64(r.Partition), 10) },
	"Offset":    func(r *record.Record) string { return strconv.FormatInt(r.Offset, 10) },
}

// Templated reports whether k has a key template (false for nil and for
// the default key).
func (k *Keyer) Templated() bool { return k != nil && k.tmpl != nil }

// keyData is what a key template sees.
type keyData struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Key is the key's bytes as a string, or the decoded key (decodedKey).
	Key     any
	Value   any
	Headers map[string]string
}

// ErrEmptyKey is returned (wrapped) when a key template renders nothing.
var ErrEmptyKey = errors.New("key template rendered an empty key")

// ErrKeyTemplate is returned (wrapped) when a key template fails on a record.
var ErrKeyTemplate = errors.New("key template")

// Key returns r's idempotency key. A template that fails on r (a missing
// JSON field, a value that is not JSON) returns a *record.Error.
func (k *Keyer) Key(r *record.Record) (string, error) {
	if k == nil || k.tmpl == nil {
		return DefaultKey(r), nil
	}
	dk, decoded := decodedKey(r)
	if k.field != nil && !decoded {
		return checkKey(r, k.field(r))
	}
	if k.fast != nil && !decoded && (r.Note == nil || !r.Note.Parsed) {
		if s, ok := fastKey(k.fast, r); ok {
			return checkKey(r, s)
		}
	}
	d := keyData{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Time, Key: string(r.Key)}
	if decoded {
		d.Key = dk
	}
	if k.wantValue {
		d.Value = r.ParsedValue()
	}
	if k.wantHeaders && len(r.Headers) > 0 {
		d.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			d.Headers[h.Key] = string(h.Value)
		}
	}
	var b bytes.Buffer
	if err := k.tmpl.Execute(&b, d); err != nil {
		return "", record.NewError(r, fmt.Errorf("%w: %w", ErrKeyTemplate, err))
	}
	return checkKey(r, b.String())
}

// checkKey refuses a key that rendered empty or with "<no value>" (a JSON
// null), which would make distinct records collide.
func checkKey(r *record.Record, s string) (string, error) {
	if s == "" {
		return "", record.NewError(r, ErrEmptyKey)
	}
	if strings.Contains(s, "<no value>") {
		return "", record.NewError(r, nullKeyError(s))
	}
	return s, nil
}

// nullKeyError is a key that rendered "<no value>" for a null field; it
// is an ErrEmptyKey.
type nullKeyError string

func (e nullKeyError) Error() string {
	return fmt.Sprintf("key template rendered the key %q: <no value> is a field that is null", string(e))
}

func (nullKeyError) Is(target error) bool { return target == ErrEmptyKey }

// DefaultKey is "<topic>/<partition>/<offset>": the record's coordinates,
// unique in a topic, so replaying a record twice writes the same row.
func DefaultKey(r *record.Record) string {
	return string(record.AppendDefaultKey(make([]byte, 0, len(r.Topic)+24), r))
}

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
