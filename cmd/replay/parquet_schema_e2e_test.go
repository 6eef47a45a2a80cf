package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
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
	dir := t.TempDir()
	out := filepath.Join(dir, "lake")
	file := filepath.Join(dir, "orders-parquet.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `version: 1
name: orders-parquet
source: {brokers: [%q], topic: orders}
group: replay.orders-parquet
window: {from: %s, to: %s}
decode:
  value: schema_registry
  schema_registry: {url: %s}
sink: {type: parquet, path: %q, provenance: true}
`, k.Addr, now.Add(-time.Hour).Format(time.RFC3339), now.Format(time.RFC3339), reg.URL(), out), 0o644); err != nil {
		t.Fatal(err)
	}
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
