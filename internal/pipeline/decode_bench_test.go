package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/rs/zerolog"
)

// benchOrderSchema is the sandbox's order event (runner/sandbox.Order) as
// an Avro record: the amount a decimal, created_at a timestamp-micros.
const benchOrderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},{"name":"customer","type":"string"},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["created","paid","shipped","cancelled","refunded"]}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"currency","type":"string"},{"name":"items","type":"int"},
 {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"channel","type":"string"},
 {"name":"shipping","type":{"type":"record","name":"Shipping","fields":[{"name":"country","type":"string"},{"name":"city","type":"string"},{"name":"zip","type":"string"}]}},
 {"name":"fx_rate","type":"double"},{"name":"note","type":"string"}]}`

var benchStatuses = []string{"created", "paid", "shipped", "cancelled", "refunded"}

// benchOrders returns n order events twice: framed Avro (schema id 5) and
// the same values as the sandbox's JSON.
func benchOrders(n int) (avro, js [][]byte) {
	rng := rand.New(rand.NewPCG(1, 1))
	str := func(b []byte, s string) []byte { return append(binary.AppendVarint(b, int64(len(s))), s...) }
	t0 := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id, cust := fmt.Sprintf("ord-%d", i), fmt.Sprintf("cus-%05d", rng.IntN(50000))
		st, cents, items := rng.IntN(len(benchStatuses)), int64(rng.IntN(100000)), 1+rng.IntN(9)
		ts, zip, fx := t0.Add(time.Duration(i)*86400*time.Millisecond), fmt.Sprintf("10%03d", rng.IntN(1000)), 0.5+rng.Float64()
		b := binary.BigEndian.AppendUint32([]byte{0}, 5)
		b = str(str(b, id), cust)
		b = binary.AppendVarint(b, int64(st))
		b = append(binary.AppendVarint(b, 4), byte(cents>>24), byte(cents>>16), byte(cents>>8), byte(cents))
		b = binary.AppendVarint(str(b, "EUR"), int64(items))
		b = binary.AppendVarint(b, ts.UnixMicro())
		b = str(str(str(str(b, "web"), "DE"), "Berlin"), zip)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(fx))
		avro = append(avro, str(b, "replay demo order"))
		js = append(js, fmt.Appendf(nil, `{"id":%q,"customer":%q,"status":%q,"amount":%d.%02d,"currency":"EUR","items":%d,`+
			`"created_at":%q,"channel":"web","shipping":{"country":"DE","city":"Berlin","zip":%q},"fx_rate":%v,"note":"replay demo order"}`,
			id, cust, benchStatuses[st], cents/100, cents%100, items, ts.Format("2006-01-02T15:04:05.000000Z"), zip, fx))
	}
	return avro, js
}

// BenchmarkAvroVsJSONToJSONL measures, in one run, the record path of a
// JSONL file sink (pipeline, then the JSONL line) for the same order
// events as framed Avro decoded by the decode stage and as JSON passed
// through, and reports their ratio (avro/json, time per record).
// Reading from Kafka is not included: it is the same for both.
func BenchmarkAvroVsJSONToJSONL(b *testing.B) {
	const n = 10000
	avro, js := benchOrders(n)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "5.avsc"), []byte(benchOrderSchema), 0o644); err != nil {
		b.Fatal(err)
	}
	dec, err := decode.NewOffline(dir, decode.Config{Value: decode.Avro}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	p := &plan.Plan{Sink: plan.Sink{Type: "file"}, Decode: plan.Decode{Value: "avro"}}
	avroPipe, err := New(p, sinks.KeysUnused, WithDecoder(context.Background(), dec))
	if err != nil {
		b.Fatal(err)
	}
	jsonPipe, err := New(&plan.Plan{Sink: plan.Sink{Type: "file"}}, sinks.KeysUnused)
	if err != nil {
		b.Fatal(err)
	}
	run := func(pipe *Pipeline, values [][]byte) time.Duration {
		start := time.Now()
		r, line := pipe.Partition(), make([]byte, 0, 1024)
		for i, v := range values {
			rec := record.Record{Topic: "orders", Offset: int64(i), Key: []byte("k"), Value: v, Time: time.UnixMilli(int64(i))}
			if _, err := r.Process(&rec); err != nil {
				b.Fatal(err)
			}
			line = encode.AppendJSONL(line[:0], &rec)
		}
		return time.Since(start)
	}
	var ta, tj time.Duration
	for b.Loop() {
		tj += run(jsonPipe, js)
		ta += run(avroPipe, avro)
	}
	b.ReportMetric(float64(tj.Nanoseconds())/float64(b.N*n), "ns/json-record")
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N*n), "ns/avro-record")
	b.ReportMetric(float64(ta)/float64(tj), "avro/json")
}

// The benchmark's two record sets hold the same values: the decoded Avro
// is the JSON, number for number.
func TestBenchOrdersAgree(t *testing.T) {
	avro, js := benchOrders(50)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "5.avsc"), []byte(benchOrderSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	dec, err := decode.NewOffline(dir, decode.Config{Value: decode.Avro}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range avro {
		got, err := dec.Decode(context.Background(), decode.Value, avro[i])
		if err != nil {
			t.Fatal(err)
		}
		if string(got.JSON) != string(js[i]) {
			t.Fatalf("record %d:\navro %s\njson %s", i, got.JSON, js[i])
		}
	}
}
