package decode

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// protoIndexes encodes a Confluent message-index array: [0] as the single
// byte 0, else a zig-zag varint count and the zig-zag varint indexes.
func protoIndexes(idx []int) []byte {
	if len(idx) == 1 && idx[0] == 0 {
		return []byte{0}
	}
	b := binary.AppendVarint(nil, int64(len(idx)))
	for _, i := range idx {
		b = binary.AppendVarint(b, int64(i))
	}
	return b
}

// The differential test of the Protobuf decoder: protoc-generated Python
// classes serialize messages of a .proto with every scalar type at its
// edges (int64 and uint64 bounds, NaN and the infinities), enums (one
// number the enum does not name), nested and repeated messages, maps with
// string, int64 and bool keys, a oneof, a proto3 optional, the well-known
// types (Timestamp before 1970, Duration, wrappers, Struct, Value,
// ListValue, Any), and a nested message named by a two-index path. replay
// compiles the .proto from the registry and decodes each framed payload;
// each value is compared with what Python's protobuf parses, rendered by
// the documented mappings.
func TestProtobufAgainstPythonProtobuf(t *testing.T) {
	out := runOracle(t, "proto_oracle.py", "300")
	proto, err := os.ReadFile(filepath.Join("testdata", "oracle", "cases.proto"))
	if err != nil {
		t.Fatal(err)
	}
	cases := readCases(t, filepath.Join(out, "cases.json"))
	reg := newFakeRegistry(t)
	reg.SeedSchema("cases-value", 1, 9, sr.Schema{Schema: string(proto), Type: sr.TypeProtobuf})
	d := newTestDecoder(t, reg.URL(), Config{Value: Protobuf})

	var diffs []string
	leaves := 0
	for i, c := range cases {
		payload := append(protoIndexes(c.Indexes), mustB64(t, c.Payload)...)
		got, err := d.Decode(context.Background(), Value, frame(9, payload))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		d, n := diffJSON("record "+strconv.Itoa(i), parseNumbers(t, c.Bare), parseNumbers(t, got.JSON))
		diffs, leaves = append(diffs, d...), leaves+n
	}
	t.Logf("protobuf: %d records, %d values compared with Python protobuf, %d differences", len(cases), leaves, len(diffs))
	for i, d := range diffs {
		if i == 20 {
			t.Errorf("... and %d more", len(diffs)-20)
			break
		}
		t.Error(d)
	}
}
