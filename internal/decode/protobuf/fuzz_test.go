package protobuf

import (
	"context"
	"encoding/json"
	"testing"
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
