package encode

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// DecodeJSONL is the inverse of AppendJSONL and AppendJSONLChecked: it reads one
// line (with or without its newline) back into the record, with the
// original bytes of key, value and header values, whatever form each was
// written in. A dead letter's line gives a record whose Note holds the
// reason (error). Fields other than the ones AppendJSONL writes are
// ignored (the http sink's idempotency_key). The error says which field is
// malformed.
func DecodeJSONL(line []byte) (record.Record, error) {
	var l struct {
		Topic         string          `json:"topic"`
		Partition     int32           `json:"partition"`
		Offset        int64           `json:"offset"`
		Timestamp     string          `json:"timestamp"`
		TimestampType string          `json:"timestamp_type"`
		Key           json.RawMessage `json:"key"`
		KeyEncoding   string          `json:"key_encoding"`
		Value         json.RawMessage `json:"value"`
		ValueEncoding string          `json:"value_encoding"`
		Headers       []headerField   `json:"headers"`
		Error         *string         `json:"error"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return record.Record{}, fmt.Errorf("not a JSON line: %w", err)
	}
	r := record.Record{Topic: l.Topic, Partition: l.Partition, Offset: l.Offset}
	var err error
	if l.Timestamp != "" {
		if r.Time, err = time.Parse(time.RFC3339Nano, l.Timestamp); err != nil {
			return r, fmt.Errorf("timestamp: %w", err)
		}
	}
	if r.TimestampType, err = record.ParseTimestampType(l.TimestampType); err != nil {
		return r, fmt.Errorf("timestamp_type: %w", err)
	}
	if r.Key, err = DecodeField(l.Key, l.KeyEncoding); err != nil {
		return r, fmt.Errorf("key: %w", err)
	}
	if r.Value, err = DecodeField(l.Value, l.ValueEncoding); err != nil {
		return r, fmt.Errorf("value: %w", err)
	}
	if r.Headers, err = decodeHeaders(l.Headers); err != nil {
		return r, err
	}
	if l.Error != nil {
		r = record.DeadLetter(r, *l.Error)
	}
	return r, nil
}

// headerField is one header of AppendHeadersJSON's array.
type headerField struct {
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding"`
}

// DecodeHeadersJSON reads AppendHeadersJSON's array (a JSONL line's
// headers, a database sink's headers column) back into headers with
// their original bytes, in order.
func DecodeHeadersJSON(b []byte) ([]record.Header, error) {
	var hs []headerField
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return decodeHeaders(hs)
}

func decodeHeaders(hs []headerField) ([]record.Header, error) {
	var out []record.Header
	for i, h := range hs {
		k, err := DecodeField(h.Key, h.KeyEncoding)
		if err != nil || k == nil {
			return nil, fmt.Errorf("header %d key: %w", i, errors.Join(err, errors.New("want a string")))
		}
		v, err := DecodeField(h.Value, h.ValueEncoding)
		if err != nil {
			return nil, fmt.Errorf("header %d value: %w", i, err)
		}
		out = append(out, record.Header{Key: string(k), Value: v})
	}
	return out, nil
}

// DecodeField returns the bytes a key, value or header field of a line
// holds, given its encoding mark ("" when the line has none): nil for null
// (or a missing field); for no mark, a JSON string's UTF-8 bytes or any
// other JSON as written; for "json", the JSON as written (a string
// included); for "base64", the decoded bytes of the string.
func DecodeField(raw json.RawMessage, encoding string) ([]byte, error) {
	isNull := len(raw) == 0 || string(raw) == "null"
	switch encoding {
	case EncodingJSON:
		if len(raw) == 0 {
			return nil, errors.New(`value_encoding "json" without a value`)
		}
		return bytes.Clone(raw), nil
	case EncodingBase64:
		var s string
		if isNull || json.Unmarshal(raw, &s) != nil {
			return nil, errors.New(`encoding "base64" wants a string`)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("not standard base64: %w", err)
		}
		return b, nil
	case "":
	default:
		return nil, fmt.Errorf("encoding %q: want base64 or json", encoding)
	}
	switch {
	case isNull:
		return nil, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	}
	return bytes.Clone(raw), nil
}
