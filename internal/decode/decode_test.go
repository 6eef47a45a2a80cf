package decode

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

const protoSchema = `syntax = "proto3";
package p;
message A { int64 id = 1; }
message B { message C { string s = 1; } C c = 1; }
`

// Each kind of record that cannot be decoded is a *BadRecordError naming
// the side, the schema id and the reason.
func TestBadRecords(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.SeedSchema("r-value", 1, 7, sr.Schema{Schema: longSchema})
	reg.SeedSchema("p-value", 1, 8, sr.Schema{Schema: protoSchema, Type: sr.TypeProtobuf})
	reg.SeedSchema("j-value", 1, 10, sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	reg.SeedSchema("bad-value", 1, 11, sr.Schema{Schema: `{"type":"record","name":"X","fields":[{"name":"a","type":"Nope"}]}`})
	for _, tc := range []struct {
		name   string
		format Format
		side   Side
		in     []byte
		id     int32
		reason string
	}{
		{"plain JSON", SchemaRegistry, Value, []byte(`{"a":1}`), NoSchemaID, "first byte 0x7b, not the magic byte 0"},
		{"shorter than the header", SchemaRegistry, Key, []byte{0, 0, 0}, NoSchemaID, "3 bytes, shorter than the 5"},
		{"unknown id", SchemaRegistry, Value, avroLong(404), 404, "not in the schema registry (HTTP 404)"},
		{"schema that does not parse", SchemaRegistry, Value, avroLong(11), 11, `unknown type "Nope"`},
		{"avro truncated", Avro, Value, frame(7, []byte{0x80}), 7, "truncated"},
		{"avro bytes left over", Avro, Value, frame(7, []byte{10, 1, 2}), 7, "2 bytes left over"},
		{"avro refuses protobuf", Avro, Value, frame(8, []byte{0, 8, 1}), 8, "the schema is PROTOBUF, and decode.value: avro decodes only AVRO"},
		{"protobuf refuses avro", Protobuf, Key, avroLong(7), 7, "the schema is AVRO, and decode.key: protobuf"},
		{"protobuf index out of range", Protobuf, Value, frame(8, []byte{2, 4}), 8, "index 2 at depth 0 is out of range"},
		{"protobuf nested index out of range", Protobuf, Value, frame(8, []byte{4, 2, 2}), 8, "index 1 at depth 1 is out of range"},
		{"protobuf negative count", Protobuf, Value, frame(8, []byte{1}), 8, "negative count -1"},
		{"protobuf negative index", Protobuf, Value, frame(8, []byte{2, 1}), 8, "is -1, out of range"},
		{"protobuf truncated indexes", Protobuf, Value, frame(8, []byte{4, 2}), 8, "count 2 is more than the 1 bytes left"},
		{"protobuf no indexes", Protobuf, Value, frame(8, nil), 8, "truncated count"},
		{"protobuf payload does not parse", Protobuf, Value, frame(8, []byte{0, 8}), 8, "does not parse as p.A"},
		{"protobuf unknown field", Protobuf, Value, frame(8, []byte{0, 16, 1}), 8, "fields its schema does not define"},
		{"json not JSON", JSONSchema, Value, frame(10, []byte(`{"a":`)), 10, "payload is not JSON"},
		{"json two documents", JSONSchema, Value, frame(10, []byte(`{} {}`)), 10, "payload is not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDecoder(t, reg.URL(), Config{Value: tc.format, Key: tc.format})
			got, err := d.Decode(context.Background(), tc.side, tc.in)
			var bad *BadRecordError
			if !errors.As(err, &bad) {
				t.Fatalf("decoded %s, err %v; want a bad record", got.JSON, err)
			}
			if bad.Side != tc.side || bad.SchemaID != tc.id || !strings.Contains(bad.Reason, tc.reason) {
				t.Fatalf("bad record %+v, want side %s, id %d, reason with %q", bad, tc.side, tc.id, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "decode "+tc.side.String()) {
				t.Fatalf("message %q does not name the side", err)
			}
		})
	}
}

// A value decodes by whatever type its id names under schema_registry;
// JSON Schema payloads pass through as one line.
func TestDecodeEachType(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.SeedSchema("r-value", 1, 7, sr.Schema{Schema: longSchema})
	reg.SeedSchema("p-value", 1, 8, sr.Schema{Schema: protoSchema, Type: sr.TypeProtobuf})
	reg.SeedSchema("j-value", 1, 10, sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry})
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{avroLong(7), `{"n":5}`},
		{frame(8, []byte{0, 8, 1}), `{"id":1}`},
		{frame(8, []byte{0}), `{"id":0}`},
		{frame(8, []byte{2, 2, 10, 3, 10, 1, 'x'}), `{"c":{"s":"x"}}`},
		{frame(8, []byte{4, 2, 0, 10, 1, 'x'}), `{"s":"x"}`},
		{frame(8, []byte{2, 2}), `{"c":null}`},
		{frame(10, []byte("{\n \"price\": 12.30,\n \"id\": 9007199254740993}")), `{"price":12.30,"id":9007199254740993}`},
	} {
		got, err := d.Decode(context.Background(), Value, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.JSON) != tc.want {
			t.Errorf("%x: got %s, want %s", tc.in, got.JSON, tc.want)
		}
	}
}

// Each record decodes by its own writer schema: an enum symbol and a field
// that the later version added.
func TestWriterSchemaPerRecord(t *testing.T) {
	reg := newFakeRegistry(t)
	v1 := `{"type":"record","name":"O","fields":[{"name":"s","type":{"type":"enum","name":"S","symbols":["NEW","PAID"]}}]}`
	v2 := `{"type":"record","name":"O","fields":[{"name":"s","type":{"type":"enum","name":"S","symbols":["NEW","CANCELLED","PAID"]}},{"name":"note","type":["null","string"],"default":null}]}`
	reg.SeedSchema("o-value", 1, 21, sr.Schema{Schema: v1})
	reg.SeedSchema("o-value", 2, 22, sr.Schema{Schema: v2})
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry})
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{frame(21, []byte{2}), `{"s":"PAID"}`},
		{frame(22, []byte{2, 2, 4, 'h', 'i'}), `{"s":"CANCELLED","note":"hi"}`},
		{frame(21, []byte{0}), `{"s":"NEW"}`},
	} {
		got, err := d.Decode(context.Background(), Value, tc.in)
		if err != nil || string(got.JSON) != tc.want {
			t.Errorf("%x: got %s, %v; want %s", tc.in, got.JSON, err, tc.want)
		}
	}
}

// Referenced schemas are resolved: an Avro named type from another
// subject, a .proto import.
func TestReferences(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.SeedSchema("money", 1, 30, sr.Schema{Schema: `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},{"name":"cur","type":"string"}]}`})
	reg.SeedSchema("order-value", 1, 31, sr.Schema{
		Schema:     `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"total","type":"Money"}]}`,
		References: []sr.SchemaReference{{Name: "shop.Money", Subject: "money", Version: 1}},
	})
	reg.SeedSchema("common.proto", 1, 32, sr.Schema{Schema: "syntax = \"proto3\";\npackage common;\nmessage Tag { string name = 1; }\n", Type: sr.TypeProtobuf})
	reg.SeedSchema("item-value", 1, 33, sr.Schema{
		Schema:     "syntax = \"proto3\";\npackage shop;\nimport \"common.proto\";\nmessage Item { common.Tag tag = 1; }\n",
		Type:       sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common.proto", Version: 1}},
	})
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry})
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{frame(31, []byte{4, 0x04, 0xce, 6, 'E', 'U', 'R'}), `{"total":{"amount":12.30,"cur":"EUR"}}`},
		{frame(33, []byte{0, 10, 3, 10, 1, 'x'}), `{"tag":{"name":"x"}}`},
	} {
		got, err := d.Decode(context.Background(), Value, tc.in)
		if err != nil || string(got.JSON) != tc.want {
			t.Errorf("%x: got %s, %v; want %s", tc.in, got.JSON, err, tc.want)
		}
	}
	info, err := d.Describe(context.Background(), 31)
	if err != nil || info != (SchemaInfo{ID: 31, Subject: "order-value", Version: 1, Type: TypeAvro}) {
		t.Fatalf("Describe(31) = %+v, %v", info, err)
	}
}

// An id whose only subject version was soft-deleted since (the registry
// still serves the schema, and lists the version only with ?deleted=true)
// is described by that version, marked deleted.
func TestDescribeSoftDeleted(t *testing.T) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("gone-value", 1, 40, sr.Schema{Schema: `{"type":"record","name":"G","fields":[{"name":"a","type":"long"}]}`})
	reg.SeedSchema("kept-value", 1, 41, sr.Schema{Schema: `{"type":"record","name":"K","fields":[{"name":"a","type":"long"}]}`})
	req, err := http.NewRequest(http.MethodDelete, reg.URL()+"/subjects/gone-value", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("soft delete: HTTP %d", resp.StatusCode)
	}
	d := newTestDecoder(t, reg.URL(), Config{Value: SchemaRegistry})
	info, err := d.Describe(context.Background(), 40)
	if err != nil || info != (SchemaInfo{ID: 40, Subject: "gone-value", Version: 1, Type: TypeAvro, Deleted: true}) {
		t.Fatalf("Describe(40) = %+v, %v; want gone-value v1, deleted", info, err)
	}
	info, err = d.Describe(context.Background(), 41)
	if err != nil || info != (SchemaInfo{ID: 41, Subject: "kept-value", Version: 1, Type: TypeAvro}) {
		t.Fatalf("Describe(41) = %+v, %v; want kept-value v1", info, err)
	}
}
