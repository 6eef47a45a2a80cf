package protobuf

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

const fuzzProto = `syntax = "proto3";
package f;
import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum E { Z = 0; O = 1; }
message M {
  double d = 1; float f = 2; int64 i = 3; uint64 u = 4; sint64 s = 5; fixed64 x = 6;
  bool b = 7; string str = 8; bytes by = 9; E e = 10; M m = 11; repeated M ms = 12;
  map<string, M> mm = 13; map<int32, string> mi = 14; oneof o { string t = 15; int32 n = 16; }
  optional int64 opt = 17; google.protobuf.Timestamp ts = 18; google.protobuf.Duration du = 19;
  google.protobuf.Int64Value w = 20; google.protobuf.Struct st = 21; google.protobuf.Any an = 22;
  repeated double ds = 23; google.protobuf.Value v = 24;
  message N { repeated E es = 1; }
}
`

// Random bytes after the framing's header never panic nor hang: they
// decode to valid JSON or fail with an error.
func FuzzDecode(f *testing.F) {
	s, err := Compile(context.Background(), fuzzProto, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0})
	f.Add([]byte{0, 9, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x18, 0x01})
	f.Add([]byte{4, 0, 0, 10, 2, 1, 1})
	f.Add([]byte{0, 0x5a, 4, 0x0a, 2, 0x08, 1, 0xb2, 1, 4, 8, 1, 0x10, 1})
	f.Add([]byte{0, 0xb2, 1, 0x2b, 0x0a, 0x21, 't', 'y', 'p', 'e', '.', 'g', 'o', 'o', 'g', 'l', 'e', 'a', 'p', 'i', 's', '.', 'c', 'o', 'm', '/', 'f', '.', 'M', 0x12, 2, 0x18, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, rest, err := ReadIndexes(b)
		if err != nil {
			return
		}
		md, err := s.Message(idx)
		if err != nil {
			return
		}
		out, err := s.AppendJSON(nil, md, rest)
		if err == nil && !json.Valid(out) {
			t.Fatalf("decoded %x to invalid JSON %s", b, out)
		}
	})
}

// A schema may import the files Confluent's serializers provide without a
// reference; confluent.type.Decimal renders as an exact number.
func TestConfluentBuiltins(t *testing.T) {
	s, err := Compile(context.Background(), `syntax = "proto3";
package shop;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
message Line {
  confluent.type.Decimal price = 1 [(confluent.field_meta).params = {key: "precision", value: "8"}];
  google.type.Date day = 2;
  confluent.type.Decimal big = 3;
}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.Message([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	// price: 1230 at scale 2; day: 2026-11-03; big: -1 at scale -3 (an
	// int32 varint is sign-extended to 64 bits)
	negScale := int64(-3)
	msg := func(fields ...[]byte) []byte { return slices.Concat(fields...) }
	bytesField := func(n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), v)
	}
	varint := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
	}
	payload := msg(
		bytesField(1, msg(bytesField(1, []byte{0x04, 0xce}), varint(3, 2))),
		bytesField(2, msg(varint(1, 2026), varint(2, 11), varint(3, 3))),
		bytesField(3, msg(bytesField(1, []byte{0xff}), varint(3, uint64(negScale)))),
	)
	got, err := s.AppendJSON(nil, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"price":12.30,"day":{"year":2026,"month":11,"day":3},"big":-1000}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
