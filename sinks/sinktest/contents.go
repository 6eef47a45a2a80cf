package sinktest

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// ContentsHarness is a Harness that reads back what its sink stored
// through the sink's documented decoding (encode.DecodeJSONL for the text
// sinks), for the Contents group.
type ContentsHarness interface {
	Harness
	// Records returns the records stored on t's target, decoded, in any
	// order. The suite calls it after Finish.
	Records(t *testing.T) []record.Record
}

// Corpus returns the hostile records of the Contents group, on partition
// 0 of topic "orders" at offsets 0, 1, ...: bytes that are not UTF-8, NUL
// bytes, a Confluent-framed Avro value, a Protobuf value, a 1 MiB binary
// value, an empty value, a tombstone, the JSON text null, a JSON string,
// JSON integers above 2^53, JSON with surrounding white space, a binary
// key, a null key, repeated header keys and a binary header value.
func Corpus() []record.Record {
	rng := rand.New(rand.NewPCG(2026, 12))
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(rng.UintN(256))
	}
	avro := []byte{0x00} // Confluent wire format: magic byte, schema id, Avro body
	avro = binary.BigEndian.AppendUint32(avro, 42)
	avro = append(avro, 0x02, 0x0a, 'o', 'r', 'd', 'e', 'r', 0xc8, 0x01, 0xff) // union index, string, long, bad byte
	proto := []byte{0x08, 0x96, 0x01, 0x12, 0x04, 'a', 0xff, 0xfe, 'b', 0x1a, 0x00}
	values := []struct {
		key, value []byte
		headers    []record.Header
	}{
		{[]byte("k-utf8-bad"), []byte("caf\xc3\x28 \xed\xa0\x80 \xff"), nil},
		{[]byte("k-nul"), []byte("a\x00b\x00"), nil},
		{[]byte("k-avro"), avro, nil},
		{[]byte("k-proto"), proto, nil},
		{[]byte("k-big"), big, nil},
		{[]byte("k-empty"), []byte{}, nil},
		{[]byte("k-tombstone"), nil, nil},
		{[]byte("k-null-text"), []byte("null"), nil},
		{[]byte("k-json-string"), []byte(`"quoted"`), nil},
		{[]byte("k-bigint"), []byte(`{"id":9007199254740993,"n":[18446744073709551617, -9007199254740995]}`), nil},
		{[]byte("k-spaces"), []byte(" {\"a\": 1}\t"), nil},
		{[]byte{0xff, 0x00, 0xfe}, []byte(`{"binary":"key"}`), nil},
		{nil, []byte(`{"null":"key"}`), nil},
		{[]byte("k-headers"), []byte(`{}`), []record.Header{{Key: "dup", Value: []byte("1")}, {Key: "dup", Value: []byte("2")},
			{Key: "bin", Value: []byte{0x00, 0xff, 0x80}}, {Key: "none"}, {Key: "empty", Value: []byte{}}}},
	}
	out := make([]record.Record, len(values))
	for i, v := range values {
		out[i] = record.Record{Topic: "orders", Offset: int64(i), Key: v.key, Value: v.value, Headers: v.headers,
			Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)}
	}
	return out
}

// testContents writes Corpus and reads it back through h: every key, value
// and header must come back byte for byte, nil apart from empty.
func testContents(t *testing.T, h ContentsHarness) {
	want := Corpus()
	s := open(t, h)
	write(t, s, want[:7])
	write(t, s, want[7:])
	finish(t, s)
	got := h.Records(t)
	slices.SortFunc(got, func(a, b record.Record) int { return int(a.Offset - b.Offset) })
	if len(got) != len(want) {
		t.Fatalf("%d records read back, want %d", len(got), len(want))
	}
	for i, w := range want {
		CompareContents(t, got[i], w)
	}
}

// CompareContents fails t, naming the field and the first byte that
// differs, unless got holds w's coordinates, key, value and headers
// exactly (nil apart from empty).
func CompareContents(t testing.TB, got, w record.Record) {
	t.Helper()
	at := func(what string, g, x []byte) {
		t.Helper()
		if bytes.Equal(g, x) && (g == nil) == (x == nil) {
			return
		}
		i := 0
		for i < len(g) && i < len(x) && g[i] == x[i] {
			i++
		}
		t.Errorf("offset %d %s: %d bytes (nil %v), want %d (nil %v); first difference at byte %d: got %q, want %q", w.Offset, what,
			len(g), g == nil, len(x), x == nil, i, g[i:min(len(g), i+16)], x[i:min(len(x), i+16)])
	}
	if got.Topic != w.Topic || got.Partition != w.Partition || got.Offset != w.Offset || !got.Time.Equal(w.Time) {
		t.Errorf("record %s/%d@%d %v, want %s/%d@%d %v", got.Topic, got.Partition, got.Offset, got.Time, w.Topic, w.Partition, w.Offset, w.Time)
	}
	at("key", got.Key, w.Key)
	at("value", got.Value, w.Value)
	if len(got.Headers) != len(w.Headers) {
		t.Errorf("offset %d: %d headers, want %d", w.Offset, len(got.Headers), len(w.Headers))
		return
	}
	for j, h := range w.Headers {
		at("header key", []byte(got.Headers[j].Key), []byte(h.Key))
		at("header value", got.Headers[j].Value, h.Value)
	}
}
