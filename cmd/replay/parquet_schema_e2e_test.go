package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/replay-tool/replay/internal/testenv"
)

// The writer schemas of the test: 41 and 43 differ in a doc only (the same
// columns), 42 adds a field.
const (
	orderSchemaV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"note","type":["null","string"],"default":null}]}`
	orderSchemaDoc = `{"type":"record","name":"Order","doc":"an order","fields":[{"name":"id","type":"long"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"note","type":["null","string"],"default":null}]}`
	orderSchemaV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"note","type":["null","string"],"default":null},{"name":"channel","type":"string","default":""}]}`
)

// framedOrder is a Confluent-framed Avro Order under schema id (42 adds
// channel): amount is the unscaled decimal, note nil for null.
func framedOrder(id int32, orderID int64, unscaled int64, at time.Time, note *string, channel string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	b = binary.AppendVarint(b, orderID)
	dec := twosComplement(big.NewInt(unscaled))
	b = binary.AppendVarint(b, int64(len(dec)))
	b = append(b, dec...)
	b = binary.AppendVarint(b, at.UnixMilli())
	if note == nil {
		b = binary.AppendVarint(b, 0)
	} else {
		b = binary.AppendVarint(b, 1)
		b = binary.AppendVarint(b, int64(len(*note)))
		b = append(b, *note...)
	}
	if id == 42 {
		b = binary.AppendVarint(b, int64(len(channel)))
		b = append(b, channel...)
	}
	return b
}

// twosComplement is n as Avro's decimal bytes: big-endian two's
// complement, in the fewest bytes.
func twosComplement(n *big.Int) []byte {
	for size := 1; ; size++ {
		lim := new(big.Int).Lsh(big.NewInt(1), uint(8*size-1))
		if n.Cmp(lim) < 0 && n.Cmp(new(big.Int).Neg(lim)) >= 0 {
			m := new(big.Int).Set(n)
			if m.Sign() < 0 {
				m.Add(m, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
			}
			return m.FillBytes(make([]byte, size))
		}
	}
}

// parquetDecodePlan writes a plan named name that decodes the values of
// topic orders at addr (decode.value: format, the registry at registry)
// over the hour before now into a parquet sink without columns (extra:
// more fields of the sink), and returns its output directory and file.
func parquetDecodePlan(t *testing.T, name, addr, registry, format, extra string, now time.Time) (out, file string) {
	t.Helper()
	dir := t.TempDir()
	out, file = filepath.Join(dir, "lake"), filepath.Join(dir, name+".yaml")
	if extra != "" {
		extra = ", " + extra
	}
	body := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topic: orders}
group: replay.%s
window: {from: %s, to: %s}
decode:
  value: %s
  schema_registry: {url: %s}
sink: {type: parquet, path: %q%s}
`, name, addr, name, now.Add(-time.Hour).Format(time.RFC3339), now.Format(time.RFC3339), format, registry, out, extra)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, file
}

// parquetSchemaRead prints, for the objects under argv[1] in name order,
// each object's name, its schema as pyarrow and DuckDB print it, and its
// rows as both read them (decimals as text, timestamps as epoch ms).
const parquetSchemaRead = `
import json, sys, glob, decimal, datetime, pyarrow.parquet as pq, duckdb
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
def norm(v):
    if isinstance(v, decimal.Decimal): return str(v)
    if isinstance(v, datetime.datetime): return (v - EPOCH) // datetime.timedelta(milliseconds=1)
    return v
con = duckdb.connect()
for f in sorted(glob.glob(sys.argv[1] + "/orders/*/*.parquet")):
    name = f[len(sys.argv[1]) + 1:]
    print(json.dumps({"object": name, "pyarrow": str(pq.read_schema(f)).split("\n-- schema metadata")[0],
        "duckdb": [[c[0], c[1]] for c in con.execute("describe select * from read_parquet(?)", [f]).fetchall()]}))
    for r in pq.read_table(f).to_pylist():
        print(json.dumps({"reader": "pyarrow", **{k: norm(v) for k, v in r.items()}}))
    cur = con.execute("select * from read_parquet(?)", [f])
    cols = [d[0] for d in cur.description]
    for row in cur.fetchall():
        print(json.dumps({"reader": "duckdb", **{k: norm(v) for k, v in zip(cols, row)}}))
`

// TestParquetSchemaColumns: under decode:, a parquet sink without columns
// writes the fields of each record's Avro schema as typed columns
// (DECIMAL(12,2), TIMESTAMP(MILLIS, UTC), nullable) after the provenance
// columns; a schema id with the same fields continues the object, one that
// adds a field starts a new object at its offset. pyarrow and DuckDB read
// every value back as produced (12.30 stays 12.30, NULL stays apart from
// "").
func TestParquetSchemaColumns(t *testing.T) {
	py := testenv.OraclePython(t, "pyarrow", "duckdb")
	k := testenv.NewKafka(t, testenv.Partitions(1), testenv.Topics("orders"))
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 41, sr.Schema{Schema: orderSchemaV1})
	reg.SeedSchema("orders-value", 2, 42, sr.Schema{Schema: orderSchemaV2})
	reg.SeedSchema("orders-value", 3, 43, sr.Schema{Schema: orderSchemaDoc})
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(-30*time.Minute + 123*time.Millisecond)
	empty, rush := "", "rush"
	k.Produce(t, "orders",
		&kgo.Record{Value: framedOrder(41, 9007199254740993, 1230, at, nil, ""), Timestamp: at},
		&kgo.Record{Value: framedOrder(43, 2, -5, at.Add(time.Millisecond), &empty, ""), Timestamp: at},
		&kgo.Record{Value: framedOrder(42, 3, 99999999999, at, &rush, "web"), Timestamp: at},
		&kgo.Record{Key: []byte("k4"), Timestamp: at},
		&kgo.Record{Value: framedOrder(41, 5, 0, at, nil, ""), Timestamp: at},
	)
	out, file := parquetDecodePlan(t, "orders-parquet", k.Addr, reg.URL(), "schema_registry", "provenance: true", now)
	if r := replay(t, "validate", file); r.code != exitOK {
		t.Fatalf("validate: %s", r)
	}
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	cmd := exec.Command(py, "-c", parquetSchemaRead, out)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	var objects []map[string]any
	rows := map[string][]map[string]any{}
	for _, l := range lines(string(got)) {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber() // 9007199254740993 is no float64
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if _, ok := m["object"]; ok {
			objects = append(objects, m)
			continue
		}
		reader := m["reader"].(string)
		delete(m, "reader")
		rows[reader] = append(rows[reader], m)
	}
	names := []string{}
	for _, o := range objects {
		names = append(names, o["object"].(string))
	}
	if want := "orders/0/00000000000000000000-00000000000000000002.parquet orders/0/00000000000000000002-00000000000000000004.parquet orders/0/00000000000000000004-00000000000000000005.parquet"; strings.Join(names, " ") != want {
		t.Fatalf("objects %v, want %s", names, want)
	}
	schema := objects[0]["pyarrow"].(string)
	for _, want := range []string{"kafka_offset: int64 not null", "kafka_timestamp: timestamp[ms, tz=UTC] not null", "id: int64", "amount: decimal128(12, 2)", "at: timestamp[ms, tz=UTC]", "note: string"} {
		if !strings.Contains(schema, want) {
			t.Errorf("pyarrow's schema of the first object lacks %q:\n%s", want, schema)
		}
	}
	if ddb := fmt.Sprint(objects[0]["duckdb"]); !strings.Contains(ddb, "[amount DECIMAL(12,2)]") || !strings.Contains(ddb, "[at TIMESTAMP WITH TIME ZONE]") {
		t.Errorf("DuckDB's schema of the first object: %s", ddb)
	}
	if s := objects[1]["pyarrow"].(string); !strings.Contains(s, "channel: string") {
		t.Errorf("the object from the added field on has no channel column:\n%s", s)
	}
	ms := at.UnixMilli()
	want := []string{
		fmt.Sprintf(`{"amount":"12.30","at":%d,"id":9007199254740993,"kafka_offset":0,"note":null}`, ms),
		fmt.Sprintf(`{"amount":"-0.05","at":%d,"id":2,"kafka_offset":1,"note":""}`, ms+1),
		fmt.Sprintf(`{"amount":"999999999.99","at":%d,"channel":"web","id":3,"kafka_offset":2,"note":"rush"}`, ms),
		`{"amount":null,"at":null,"channel":null,"id":null,"kafka_offset":3,"note":null}`,
		fmt.Sprintf(`{"amount":"0.00","at":%d,"id":5,"kafka_offset":4,"note":null}`, ms),
	}
	for _, reader := range []string{"pyarrow", "duckdb"} {
		if len(rows[reader]) != len(want) {
			t.Fatalf("%s read %d rows, want %d", reader, len(rows[reader]), len(want))
		}
		for i, r := range rows[reader] {
			if r["kafka_topic"] != "orders" || r["kafka_partition"] != json.Number("0") || r["kafka_timestamp"] != json.Number(fmt.Sprint(ms)) {
				t.Errorf("%s row %d: provenance %v", reader, i, r)
			}
			delete(r, "kafka_topic")
			delete(r, "kafka_partition")
			delete(r, "kafka_timestamp")
			b, _ := json.Marshal(r) // keys sorted
			if string(b) != want[i] {
				t.Errorf("%s row %d:\n got %s\nwant %s", reader, i, b, want[i])
			}
		}
	}
}

// framedProto is a Confluent-framed Protobuf Order (message index [0]):
// id, big (uint64), ratio (double), blob (bytes), note (optional; nil:
// unset), tags (repeated).
func framedProto(id int32, orderID int64, big uint64, ratio float64, blob []byte, note *string, tags ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	b = append(b, 0) // the message-index array [0]
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(orderID))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, big)
	b = protowire.AppendTag(b, 3, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(ratio))
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, blob)
	if note != nil {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, *note)
	}
	for _, tag := range tags {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendString(b, tag)
	}
	return b
}

// TestParquetSchemaColumnsProtobuf: the columns of a Protobuf message's
// fields, read back by pyarrow and DuckDB: a uint64 above 2^63 as UINT_64,
// a double as it was, bytes as bytes, an optional string NULL when unset
// and "" when set empty, a repeated field as its JSON array.
func TestParquetSchemaColumnsProtobuf(t *testing.T) {
	py := testenv.OraclePython(t, "pyarrow", "duckdb")
	k := testenv.NewKafka(t, testenv.Partitions(1), testenv.Topics("orders"))
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 51, sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
message Order { int64 id = 1; uint64 big = 2; double ratio = 3; bytes blob = 4; optional string note = 5; repeated string tags = 6; }
`})
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(-30 * time.Minute)
	empty := ""
	k.Produce(t, "orders",
		&kgo.Record{Value: framedProto(51, -7, math.MaxUint64, 0.1, []byte{0, 0xff}, nil, "a", "b"), Timestamp: at},
		&kgo.Record{Value: framedProto(51, 8, 1, -2.5e-7, nil, &empty), Timestamp: at},
	)
	out, file := parquetDecodePlan(t, "orders-proto", k.Addr, reg.URL(), "protobuf", "", now)
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	const read = `
import json, sys, glob, pyarrow.parquet as pq, duckdb
f = glob.glob(sys.argv[1] + "/orders/0/*.parquet")[0]
print(str(pq.read_schema(f)).split("\n-- schema metadata")[0].replace("\n", "; "))
for r in pq.read_table(f).to_pylist():
    r["blob"] = None if r["blob"] is None else r["blob"].hex()
    print(json.dumps(r, sort_keys=True))
con = duckdb.connect()
print(con.execute("select string_agg(column_name || ' ' || column_type, ', ') from (describe select * from read_parquet(?))", [f]).fetchone()[0])
for row in con.execute("select id, big::varchar, ratio, hex(blob), note, tags from read_parquet(?)", [f]).fetchall():
    print(json.dumps(row))
`
	got, err := exec.Command(py, "-c", read, out).Output()
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	want := []string{
		"id: int64; big: uint64; ratio: double; blob: binary; note: string; tags: string",
		`{"big": 18446744073709551615, "blob": "00ff", "id": -7, "note": null, "ratio": 0.1, "tags": "[\"a\",\"b\"]"}`,
		`{"big": 1, "blob": "", "id": 8, "note": "", "ratio": -2.5e-07, "tags": "[]"}`,
		"id BIGINT, big UBIGINT, ratio DOUBLE, blob BLOB, note VARCHAR, tags VARCHAR",
		`[-7, "18446744073709551615", 0.1, "00FF", null, "[\"a\",\"b\"]"]`,
		`[8, "1", -2.5e-07, "", "", "[]"]`,
	}
	if g := lines(string(got)); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("read back:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}
