package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/replay-tool/replay/internal/testenv"
)

// framedAvro is a Confluent-framed Avro {id, status[, note]} under schema id.
func framedAvro(id int32, orderID int64, status string, note *string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	b = binary.AppendVarint(b, orderID)
	b = binary.AppendVarint(b, int64(len(status)))
	b = append(b, status...)
	if id == 12 {
		if note == nil {
			return append(b, 0)
		}
		b = binary.AppendVarint(append(b, 2), int64(len(*note)))
		b = append(b, *note...)
	}
	return b
}

func decodePlan(t *testing.T, dir, addr, registry string, from, to time.Time, out string) string {
	t.Helper()
	body := fmt.Sprintf(`version: 1
name: orders-avro
source: {brokers: [%q], topic: orders}
group: replay.orders-avro
window: {from: %s, to: %s}
decode:
  value: schema_registry
  schema_registry: {url: %s}
filter: value.status != "open"
on_error: skip
sink: {type: file, path: %q}
`, addr, from.Format(time.RFC3339), to.Format(time.RFC3339), registry, out)
	path := filepath.Join(dir, "orders-avro.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A run decodes framed Avro values by each record's writer schema (two
// versions in the window) before the filter; records that do not decode
// (no framing, an unknown schema id) are bad records that on_error: skip
// counts as decode-error; a tombstone is written as null, not decoded.
func TestRunDecodesAvro(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Partitions(1), testenv.Topics("orders"))
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 11, sr.Schema{Schema: `{"type":"record","name":"O","fields":[{"name":"id","type":"long"},{"name":"status","type":"string"}]}`})
	reg.SeedSchema("orders-value", 2, 12, sr.Schema{Schema: `{"type":"record","name":"O","fields":[{"name":"id","type":"long"},{"name":"status","type":"string"},{"name":"note","type":["null","string"],"default":null}]}`})
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(-30 * time.Minute)
	hi := "rush"
	k.Produce(t, "orders",
		&kgo.Record{Value: framedAvro(11, 9007199254740993, "paid", nil), Timestamp: at},
		&kgo.Record{Value: framedAvro(11, 2, "open", nil), Timestamp: at},
		&kgo.Record{Value: []byte(`{"id":3}`), Timestamp: at},
		&kgo.Record{Value: framedAvro(12, 4, "paid", &hi), Timestamp: at},
		&kgo.Record{Key: []byte("k5"), Timestamp: at},
		&kgo.Record{Value: framedAvro(99, 6, "paid", nil), Timestamp: at},
	)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	report := filepath.Join(dir, "report.json")
	file := decodePlan(t, dir, k.Addr, reg.URL(), now.Add(-time.Hour), now, out)
	// plan names the schemas of the range's first and last record.
	r := replay(t, "plan", file)
	if want := "partition 0 schemas: first record value id 11 (orders-value v1, AVRO); last record value id 99 (schema id 99 is not in the schema registry"; r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("plan: want a line %q:\n%s", want, r)
	}
	r = replay(t, "plan", "--output", "json", file)
	pj := gjson.Parse(r.stdout)
	if got := strings.Join(strings.Fields(pj.Get("partitions.0.first_record_schemas.value").Raw), ""); got != `{"id":11,"subject":"orders-value","version":1,"type":"AVRO"}` {
		t.Errorf("plan --output json: first record's value schema %s\n%s", got, r)
	}
	if got := pj.Get("partitions.0.last_record_schemas.value.id").Int(); got != 99 {
		t.Errorf("plan --output json: last record's value schema id %d, want 99", got)
	}
	if r := replay(t, "run", "--yes", "--report", report, file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	got := lines(string(readFile(t, out)))
	want := []string{
		`{"id":9007199254740993,"status":"paid"}|11`,
		`{"id":4,"status":"paid","note":"rush"}|12`,
		`null|`,
	}
	if len(got) != len(want) {
		t.Fatalf("wrote %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, l := range got {
		if s := gjson.Get(l, "value").Raw + "|" + gjson.Get(l, "value_schema_id").Raw; s != want[i] {
			t.Errorf("line %d: value|schema id %s, want %s (%s)", i, s, want[i], l)
		}
	}
	rep := gjson.ParseBytes(readFile(t, report))
	if n := rep.Get("partitions.0.errors.decode-error").Int(); n != 2 {
		t.Errorf("decode-error count %d, want 2: %s", n, rep.Raw)
	}
	if got, want := strings.Join(strings.Fields(rep.Get("schemas").Raw), ""), `[{"side":"value","schema_id":11,"records":2},{"side":"value","schema_id":12,"records":1}]`; got != want {
		t.Errorf("report schemas %s, want %s", got, want)
	}
}

// A registry that cannot be reached fails the run before it reads a
// record, naming the registry.
func TestRunDecodeRegistryDown(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Partitions(1), testenv.Topics("orders"))
	reg := srfake.New()
	url := reg.URL()
	reg.Close()
	now := time.Now().UTC().Truncate(time.Second)
	k.Produce(t, "orders", &kgo.Record{Value: framedAvro(11, 1, "paid", nil), Timestamp: now.Add(-time.Minute)})
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := decodePlan(t, dir, k.Addr, url, now.Add(-time.Hour), now, out)
	if err := os.WriteFile(file, append(readFile(t, file), []byte("retry: {max_elapsed: 1s}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := replay(t, "run", "--yes", file)
	if r.code == exitOK || !strings.Contains(r.stderr, "schema registry") {
		t.Fatalf("run against a registry that is down: %s", r)
	}
	if b, _ := os.ReadFile(out); len(b) > 0 {
		t.Fatalf("wrote %q", b)
	}
}

// `replay plan` says of a range's last record that it is a tombstone (no
// value to decode), not that its value is not framed.
func TestPlanNamesATombstone(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Partitions(1), testenv.Topics("orders"))
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 11, sr.Schema{Schema: `{"type":"record","name":"O","fields":[{"name":"id","type":"long"},{"name":"status","type":"string"}]}`})
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(-30 * time.Minute)
	k.Produce(t, "orders",
		&kgo.Record{Value: framedAvro(11, 1, "paid", nil), Timestamp: at},
		&kgo.Record{Key: []byte("k1"), Timestamp: at},
	)
	dir := t.TempDir()
	file := decodePlan(t, dir, k.Addr, reg.URL(), now.Add(-time.Hour), now, filepath.Join(dir, "out.jsonl"))
	r := replay(t, "plan", file)
	if want := "partition 0 schemas: first record value id 11 (orders-value v1, AVRO); last record no value (a tombstone)"; r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("plan: want a line %q:\n%s", want, r)
	}
	r = replay(t, "plan", "--output", "json", file)
	if !gjson.Get(r.stdout, "partitions.0.last_record_schemas.tombstone").Bool() {
		t.Errorf("plan --output json: the last record is not said to be a tombstone:\n%s", r)
	}
}
