package decode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// Columns: an Avro record's and a Protobuf message's fields as typed
// columns, each Avro logical type to the column that holds it exactly,
// the message the indexes name, and the schemas without columns.
func TestColumns(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.SeedSchema("a-value", 1, 21, sr.Schema{Schema: `{"type":"record","name":"O","fields":[
		{"name":"id","type":"long"},
		{"name":"n","type":"int"},
		{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
		{"name":"huge","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":2}},
		{"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
		{"name":"us","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"ns","type":{"type":"long","logicalType":"timestamp-nanos"}},
		{"name":"local","type":{"type":"long","logicalType":"local-timestamp-millis"}},
		{"name":"day","type":{"type":"int","logicalType":"date"}},
		{"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
		{"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
		{"name":"u","type":{"type":"string","logicalType":"uuid"}},
		{"name":"f","type":"float"},
		{"name":"d","type":["double","null"]},
		{"name":"ok","type":"boolean"},
		{"name":"b","type":"bytes"},
		{"name":"fx","type":{"type":"fixed","name":"F","size":4}},
		{"name":"s","type":"string"},
		{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
		{"name":"either","type":["string","long"]},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"m","type":{"type":"map","values":"long"}},
		{"name":"sub","type":{"type":"record","name":"S","fields":[{"name":"x","type":"int"}]}}]}`})
	reg.SeedSchema("l-value", 1, 22, sr.Schema{Schema: `"long"`})
	reg.SeedSchema("p-value", 1, 23, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package p;
import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";
message A { int64 id = 1; uint64 u = 2; uint32 u32 = 3; sint32 s = 4; bytes b = 5; double d = 6; float f = 7; bool ok = 8;
  E e = 9; repeated int32 r = 10; map<string, int64> m = 11; google.protobuf.Int64Value w = 12;
  google.protobuf.Timestamp at = 13; optional string opt = 14; oneof o { string x = 15; int32 y = 16; } }
enum E { E0 = 0; }
message B { string s = 1; }
`})
	reg.SeedSchema("j-value", 1, 24, sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry})
	ctx := context.Background()
	str := func(cols []Column) string { return fmt.Sprint(cols) }

	got, err := d.Columns(ctx, frame(21, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := "[{id int64} {n int32} {amount decimal(12,2)} {huge string} {at timestamp_millis} {us timestamp_micros} {ns string} {local string} " +
		"{day date} {tm time_millis} {tu time_micros} {u string} {f float} {d double} {ok boolean} {b base64} {fx base64} {s string} {e string} " +
		"{either string} {tags string} {m string} {sub string}]"
	if str(got) != want {
		t.Errorf("avro:\n got %s\nwant %s", str(got), want)
	}
	if got, err = d.Columns(ctx, frame(23, []byte{0})); err != nil {
		t.Fatal(err)
	}
	want = "[{id int64} {u uint64} {u32 int64} {s int32} {b base64} {d double} {f float} {ok boolean} {e string} {r string} {m string} " +
		"{w int64} {at string} {opt string} {x string} {y int32}]"
	if str(got) != want {
		t.Errorf("protobuf A:\n got %s\nwant %s", str(got), want)
	}
	if got, err = d.Columns(ctx, frame(23, []byte{2, 2})); err != nil || str(got) != "[{s string}]" {
		t.Errorf("protobuf B (indexes [1]): %v, %v", got, err)
	}
	for id, want := range map[int32]string{22: "an Avro schema of type long, not a record", 24: "a JSON schema"} {
		_, err := d.Columns(ctx, frame(id, nil))
		var ce *ColumnsError
		if !errors.As(err, &ce) || ce.Reason != want {
			t.Errorf("schema id %d: %v, want a *ColumnsError %q", id, err, want)
		}
	}
	var bad *BadRecordError
	if _, err := d.Columns(ctx, []byte{1, 2}); !errors.As(err, &bad) {
		t.Errorf("unframed: %v, want a *BadRecordError", err)
	}
}
