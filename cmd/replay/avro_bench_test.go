//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/replay-tool/replay/internal/testenv"
)

// BenchmarkAvroVsConfluentPython measures, in one run, decoding a window of
// framed Avro order events (the sandbox's order shape, schema id 5) into
// JSONL: replay's records/s against confluent-kafka-python's
// DeserializingConsumer (AvroDeserializer, fastavro) reading the same
// partition to JSON lines, and against replay on the same orders as JSON
// (no decode:). Each side is a process timed from start to exit. It needs
// a Python with confluent-kafka[avro,schemaregistry] in
// REPLAY_BENCH_PYTHON (skipped otherwise); not run by go test ./...:
//
//	python3 -m venv /tmp/ckpy && /tmp/ckpy/bin/pip install 'confluent-kafka[avro,schemaregistry]==2.16.2'
//	REPLAY_BENCH_PYTHON=/tmp/ckpy/bin/python go test -run '^$' -bench AvroVsConfluentPython -benchtime 3x ./cmd/replay
//
// REPLAY_BENCH_RECORDS sets the records per topic (default 200,000).
func BenchmarkAvroVsConfluentPython(b *testing.B) {
	py := os.Getenv("REPLAY_BENCH_PYTHON")
	if py == "" {
		b.Skip("REPLAY_BENCH_PYTHON (a python with confluent-kafka[avro,schemaregistry]) is not set")
	}
	n := 200_000
	if s := os.Getenv("REPLAY_BENCH_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("REPLAY_BENCH_RECORDS: %v", err)
		}
	}
	dir := b.TempDir()
	bin := benchBuildReplay(b, dir)
	k := testenv.NewKafka(b, testenv.Partitions(1), testenv.Topics("orders-avro", "orders-json"))
	reg := srfake.New()
	b.Cleanup(reg.Close)
	reg.SeedSchema("orders-avro-value", 1, 5, sr.Schema{Schema: avroBenchSchema})
	at := time.Now().Add(-time.Hour)
	avro, js := avroBenchOrders(n)
	for i := 0; i < n; i += 10_000 {
		var ra, rj []*kgo.Record
		for j := i; j < min(i+10_000, n); j++ {
			ra = append(ra, &kgo.Record{Value: avro[j], Timestamp: at})
			rj = append(rj, &kgo.Record{Value: js[j], Timestamp: at})
		}
		k.Produce(b, "orders-avro", ra...)
		k.Produce(b, "orders-json", rj...)
	}
	var tAvro, tJSON, tPy, tRaw time.Duration
	for i := 0; b.Loop(); i++ {
		tAvro += avroBenchReplay(b, bin, dir, k.Addr, "orders-avro", reg.URL(), i, n)
		tJSON += avroBenchReplay(b, bin, dir, k.Addr, "orders-json", "", i, n)
		tPy += avroBenchPython(b, py, dir, k.Addr, reg.URL(), i, n)
		tRaw += avroBenchPython(b, py, dir, k.Addr, "-", i, n)
	}
	rate := func(d time.Duration) float64 { return float64(b.N*n) / d.Seconds() }
	b.ReportMetric(rate(tAvro), "replay-avro-rec/s")
	b.ReportMetric(rate(tJSON), "replay-json-rec/s")
	b.ReportMetric(rate(tPy), "ckpy-avro-rec/s")
	b.ReportMetric(rate(tRaw), "ckpy-raw-rec/s")
	b.ReportMetric(rate(tAvro)/rate(tPy), "avro-vs-ckpy")
	b.ReportMetric(rate(tAvro)/rate(tJSON), "avro-vs-json")
}

// avroBenchReplay runs replay over topic into a JSONL file, decoding Avro
// through registry when it is set, and returns the process's wall time.
func avroBenchReplay(b *testing.B, bin, dir, addr, topic, registry string, round, n int) time.Duration {
	b.Helper()
	out := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", topic, round))
	decode := ""
	if registry != "" {
		decode = fmt.Sprintf("decode: {value: avro, schema_registry: {url: %q}}\n", registry)
	}
	body := fmt.Sprintf("version: 1\nname: bench-%s-%d\nsource: {brokers: [%q], topic: %s}\ngroup: replay.bench-%s-%d\nwindow: {from: -1d}\n%ssink: {type: file, path: %q}\n",
		topic, round, addr, topic, topic, round, decode, out)
	planFile := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", topic, round))
	if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if o, err := exec.Command(bin, "run", "--yes", "--log-level", "warn", planFile).CombinedOutput(); err != nil {
		b.Fatalf("replay run %s: %v\n%s", topic, err, o)
	}
	d := time.Since(start)
	avroBenchLines(b, out, n)
	return d
}

// avroBenchPython runs testdata/ckpy_consume.py over orders-avro (registry
// "-": the plain Consumer, the control) and returns the process's wall
// time.
func avroBenchPython(b *testing.B, py, dir, addr, registry string, round, n int) time.Duration {
	b.Helper()
	out := filepath.Join(dir, fmt.Sprintf("py-%d-%t.jsonl", round, registry == "-"))
	start := time.Now()
	cmd := exec.Command(py, filepath.Join("testdata", "ckpy_consume.py"), addr, "orders-avro", registry, strconv.Itoa(n), out)
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("confluent-kafka-python: %v\n%s", err, o)
	}
	d := time.Since(start)
	avroBenchLines(b, out, n)
	return d
}

// avroBenchLines fails b unless path holds n lines.
func avroBenchLines(b *testing.B, path string, n int) {
	b.Helper()
	if got, err := benchCountLines(path); err != nil || got != n {
		b.Fatalf("%s: %d lines (%v), want %d", path, got, err, n)
	}
}

const avroBenchSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},{"name":"customer","type":"string"},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["created","paid","shipped","cancelled","refunded"]}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"currency","type":"string"},{"name":"items","type":"int"},
 {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"channel","type":"string"},
 {"name":"shipping","type":{"type":"record","name":"Shipping","fields":[{"name":"country","type":"string"},{"name":"city","type":"string"},{"name":"zip","type":"string"}]}},
 {"name":"fx_rate","type":"double"},{"name":"note","type":"string"}]}`

var avroBenchStatuses = []string{"created", "paid", "shipped", "cancelled", "refunded"}

// avroBenchOrders returns n order events twice: framed Avro (schema id 5,
// avroBenchSchema) and the same values as the sandbox's JSON.
func avroBenchOrders(n int) (avro, js [][]byte) {
	rng := rand.New(rand.NewPCG(1, 1))
	str := func(b []byte, s string) []byte { return append(binary.AppendVarint(b, int64(len(s))), s...) }
	t0 := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	for i := range n {
		id, cust := fmt.Sprintf("ord-%d", i), fmt.Sprintf("cus-%05d", rng.IntN(50000))
		st, cents, items := rng.IntN(len(avroBenchStatuses)), int64(rng.IntN(100000)), 1+rng.IntN(9)
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
			id, cust, avroBenchStatuses[st], cents/100, cents%100, items, ts.Format("2006-01-02T15:04:05.000000Z"), zip, fx))
	}
	return avro, js
}
