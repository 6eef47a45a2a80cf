package sinktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// Window returns a deterministic window of records: partitions 0..n-1 of
// topic "orders", each 20 to 60 records at increasing offsets with gaps (as
// compaction and transaction markers leave), millisecond timestamps, Kafka
// keys that repeat (some absent), headers (repeated keys, null values), and
// values mixing JSON documents, text that is not JSON (quotes, newlines,
// U+2028, invalid UTF-8), empty values and tombstones.
//
// No value is valid JSON spread over several lines: sinks store those
// differently (the file sink writes them as strings to keep one record per
// line, a database as JSON), so they belong in sink-specific tests.
func Window(seed uint64, partitions int) [][]record.Record {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	base := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	out := make([][]record.Record, partitions)
	for p := range out {
		offset := int64(rng.IntN(1000))
		for range 20 + rng.IntN(41) {
			offset += 1 + int64(rng.IntN(4)/3)
			r := record.Record{
				Topic:     "orders",
				Partition: int32(p),
				Offset:    offset,
				Time:      base.Add(time.Duration(offset)*time.Millisecond + time.Duration(p)*time.Second),
				Value:     value(rng, p, offset),
			}
			if rng.IntN(5) > 0 {
				r.Key = fmt.Appendf(nil, "k-%d", rng.IntN(6))
			}
			switch rng.IntN(4) {
			case 1:
				r.Headers = []record.Header{{Key: "trace", Value: fmt.Appendf(nil, "t-%d", offset)}}
			case 2:
				r.Headers = []record.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}, {Key: "none"}}
			case 3:
				r.Headers = []record.Header{{Key: "bin", Value: []byte{0xff, 'a', 0x01}}}
			}
			out[p] = append(out[p], r)
		}
	}
	return out
}

func value(rng *rand.Rand, p int, offset int64) []byte {
	switch rng.IntN(10) {
	case 0:
		return nil // tombstone
	case 1:
		return []byte{}
	case 2:
		return fmt.Appendf(nil, "line one\nline \"two\"\t\\ %d", offset)
	case 3:
		return fmt.Appendf(nil, "sep\u2028ar\xff\xfeted %d", offset)
	case 4:
		return fmt.Appendf(nil, `{"id": %d, "unterminated": `, offset)
	case 5:
		return fmt.Appendf(nil, `[%d, "x", true, null, 1.50, 12345678901234567890]`, offset)
	case 6:
		return fmt.Appendf(nil, `  "a JSON string %d é"  `, offset)
	case 7:
		return fmt.Appendf(nil, `{"id":%d,"id":%d,"s":"<tag> & \u00e9\n"}`, offset-1, offset)
	}
	note, _ := json.Marshal(fmt.Sprintf("note %d ü \"q\"", rng.IntN(100)))
	return fmt.Appendf(nil, `{"id":%d,"partition":%d,"nested":{"b":[1,2],"a":%s}}`, offset, p, note)
}

// Batches cuts records into consecutive batches of 1 to max records.
func Batches(rng *rand.Rand, records []record.Record, max int) [][]record.Record {
	var out [][]record.Record
	for len(records) > 0 {
		n := min(1+rng.IntN(max), len(records))
		out = append(out, records[:n])
		records = records[n:]
	}
	return out
}

// Stored is one record as every sink stores it, the unit of Contents. A
// harness decodes what it reads back (a line, a row) into a Stored and
// returns its String.
type Stored struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	// Value is the value as stored: the JSON document, a JSON string (a value
	// that is not JSON) or null (a tombstone).
	Value json.RawMessage `json:"value"`
	// Headers is a JSON array of {"key","value"} objects, in record order.
	Headers json.RawMessage `json:"headers"`
}

// String is the canonical form: the coordinates, the timestamp in UTC with
// milliseconds, and the value and headers as JSON with sorted object keys,
// no insignificant space, and numbers as written.
func (s Stored) String() string {
	return fmt.Sprintf("%s/%d@%d %s value=%s headers=%s", s.Topic, s.Partition, s.Offset,
		s.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"), canonicalJSON(s.Value), canonicalJSON(s.Headers))
}

func canonicalJSON(raw json.RawMessage) string {
	if raw == nil {
		return "<missing>"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Sprintf("<invalid JSON %q: %v>", raw, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Expect returns what a sink stores for r: the value as JSON when it is
// valid JSON, else as a JSON string (invalid UTF-8 becoming U+FFFD), null
// for a tombstone; header values likewise as strings or null.
func Expect(r record.Record) Stored {
	s := Stored{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Time, Value: json.RawMessage("null")}
	switch {
	case r.Value == nil:
	case json.Valid(r.Value):
		s.Value = r.Value
	default:
		s.Value, _ = json.Marshal(string(r.Value))
	}
	type header struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
	hs := []header{}
	for _, h := range r.Headers {
		var v *string
		if h.Value != nil {
			v = new(string(h.Value))
		}
		hs = append(hs, header{h.Key, v})
	}
	s.Headers, _ = json.Marshal(hs)
	return s
}

// Want returns the expected contents after writing window once.
func Want(window [][]record.Record) []string {
	var out []string
	for _, part := range window {
		for _, r := range part {
			out = append(out, Expect(r).String())
		}
	}
	return out
}

// Equal fails t unless got and want hold the same strings, in any order,
// reporting the first differences.
func Equal(t testing.TB, what string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if slices.Equal(got, want) {
		return
	}
	var missing, extra []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i++
			j++
		}
	}
	t.Errorf("%s: got %d records, want %d; %d missing, %d unexpected (up to 5 of each):\nmissing:\n\t%s\nunexpected:\n\t%s",
		what, len(got), len(want), len(missing), len(extra),
		strings.Join(missing[:min(5, len(missing))], "\n\t"), strings.Join(extra[:min(5, len(extra))], "\n\t"))
}

// Targets gives each test one target, created on first use and returned
// again for the same test: what Harness.New needs to reopen a target.
type Targets[T any] struct {
	mu sync.Mutex
	m  map[*testing.T]T
}

// Get returns t's target, calling create for the first one.
func (ts *Targets[T]) Get(t *testing.T, create func() T) T {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if v, ok := ts.m[t]; ok {
		return v
	}
	if ts.m == nil {
		ts.m = map[*testing.T]T{}
	}
	v := create()
	ts.m[t] = v
	t.Cleanup(func() {
		ts.mu.Lock()
		delete(ts.m, t)
		ts.mu.Unlock()
	})
	return v
}

// StoredLine is the Stored of one line a text sink wrote (AppendJSONL's
// form), decoded with encode.DecodeJSONL: the record's original bytes, as
// Expect renders them, so a line that does not give them back differs.
func StoredLine(line []byte) (Stored, error) {
	r, err := encode.DecodeJSONL(line)
	if err != nil {
		return Stored{}, err
	}
	return Expect(r), nil
}

// TextHarness is a Harness whose sink stores text only and refuses bytes
// that are not UTF-8 as bad records (a CSV file: a cell has no room to say
// how it is encoded). The suite's windows then hold UTF-8 records only;
// the refusal itself belongs in the sink's own tests.
type TextHarness interface {
	Harness
	TextOnly()
}

// windowFor is Window(seed, partitions), for h: with every key, value and
// header value that is not UTF-8 made UTF-8 for a TextHarness.
func windowFor(h Harness, seed uint64, partitions int) [][]record.Record {
	w := Window(seed, partitions)
	if _, ok := h.(TextHarness); !ok {
		return w
	}
	text := func(b []byte) []byte {
		if b == nil || utf8.Valid(b) {
			return b
		}
		return []byte(strings.ToValidUTF8(string(b), "?"))
	}
	for _, part := range w {
		for i := range part {
			r := &part[i]
			r.Key, r.Value = text(r.Key), text(r.Value)
			for j := range r.Headers {
				r.Headers[j].Value = text(r.Headers[j].Value)
			}
		}
	}
	return w
}
