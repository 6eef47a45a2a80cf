package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

const orderSchema = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"long"},{"name":"status","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}`

// avroOrder is a framed Order (schema id 5): id, status, amount 12.30.
func avroOrder(id int64, status string) []byte {
	b := []byte{0, 0, 0, 0, 5}
	b = binary.AppendVarint(b, id)
	b = binary.AppendVarint(b, int64(len(status)))
	b = append(b, status...)
	return append(b, 4, 0x04, 0xce)
}

func offlineDecoder(t *testing.T, value, key string) *decode.Decoder {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "5.avsc"), []byte(orderSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := decode.NewOffline(dir, decode.Config{Value: decode.Format(value), Key: decode.Format(key)}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func buildDecoding(t *testing.T, filterExpr, key string) *Run {
	t.Helper()
	p := &plan.Plan{Filter: filterExpr, Sink: plan.Sink{Type: "postgres", Key: key}, Decode: plan.Decode{Value: "avro", Key: "none"}}
	pl, err := New(p, sinks.KeysAll, WithDecoder(context.Background(), offlineDecoder(t, "avro", "none")))
	if err != nil {
		t.Fatal(err)
	}
	return pl.Partition()
}

// The decode stage runs before the filter and the key template: both see
// the decoded value; the bytes stay as Kafka holds them.
func TestDecodeBeforeFilterAndKey(t *testing.T) {
	run := buildDecoding(t, `value.status == "paid" && value.amount > 12`, "order-{{ .Value.id }}")
	if run.Identity() {
		t.Fatal("a decoding pipeline reports itself the identity")
	}
	paid := record.Record{Topic: "orders", Value: avroOrder(9007199254740993, "paid")}
	raw := append([]byte(nil), paid.Value...)
	ok, err := run.Process(&paid)
	if err != nil || !ok {
		t.Fatalf("paid: ok %v, err %v", ok, err)
	}
	if string(paid.Value) != string(raw) {
		t.Fatal("the record's bytes changed")
	}
	d := paid.Note.Decoded
	if d == nil || string(d.Value) != `{"id":9007199254740993,"status":"paid","amount":12.30}` || d.ValueSchemaID != 5 {
		t.Fatalf("decoded %+v", d)
	}
	if paid.IdemKey != "order-9007199254740993" {
		t.Fatalf("key %q, want order-9007199254740993 (the long as written)", paid.IdemKey)
	}
	open := record.Record{Topic: "orders", Value: avroOrder(2, "open")}
	if ok, err := run.Process(&open); ok || err != nil {
		t.Fatalf("open: ok %v, err %v; want filtered out", ok, err)
	}
}

// A value that does not decode is the record's error, for on_error,
// naming the side, the id and the reason; a tombstone is not decoded.
func TestDecodeBadRecord(t *testing.T) {
	run := buildDecoding(t, "", "")
	r := record.Record{Topic: "orders", Partition: 1, Offset: 77, Value: []byte(`{"id":1}`)}
	_, err := run.Process(&r)
	var re *record.Error
	var bad *decode.BadRecordError
	if !errors.As(err, &re) || re.Offset != 77 || !errors.As(err, &bad) || bad.Side != decode.Value {
		t.Fatalf("err %v, want the record's error wrapping a bad record", err)
	}
	if !strings.Contains(err.Error(), "not in the Confluent wire format") {
		t.Fatalf("err %q does not say why", err)
	}
	unknown := record.Record{Topic: "orders", Value: []byte{0, 0, 0, 0, 6, 2}}
	if _, err := run.Process(&unknown); !errors.As(err, &bad) || bad.SchemaID != 6 {
		t.Fatalf("err %v, want a bad record naming schema id 6", err)
	}
	tomb := record.Record{Topic: "orders", Key: []byte("k")}
	if ok, err := run.Process(&tomb); !ok || err != nil || tomb.Note.DecodedOrNil() != nil {
		t.Fatalf("tombstone: ok %v, err %v, note %+v", ok, err, tomb.Note)
	}
}

// A plan that decodes needs a decoder.
func TestDecodeWithoutDecoder(t *testing.T) {
	_, err := New(&plan.Plan{Sink: plan.Sink{Type: "stdout"}, Decode: plan.Decode{Value: "avro"}}, sinks.KeysAll)
	if err == nil {
		t.Fatal("built a decoding pipeline without a decoder")
	}
}
