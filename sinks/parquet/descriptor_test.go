package parquet_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/registry"
)

const parquetPlan = `version: 1
name: orders-to-lake
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-to-lake
window: {from: 2026-11-03T10:00:00Z, to: 2026-11-03T11:00:00Z}
throttle: {records_per_second: 1000}
sink:
  type: parquet
`

func parsePlan(sink string) (*plan.Plan, error) {
	return plan.Parse("plan.yaml", []byte(parquetPlan+sink), plan.LoadOptions{Sinks: registry.Catalog(),
		Now: func() time.Time { return time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC) }})
}

// A section's fields are checked when the plan loads: each problem names
// its field. A path, url or column name with a bidirectional control
// character is refused (non-ASCII letters are fine).
func TestSectionValidation(t *testing.T) {
	for _, tc := range []struct{ sink, want string }{
		{"  path: out/\n  max_rows_per_file: 0\n", "sink.max_rows_per_file: 0: want at least 1, e.g. 1000000 (the default, when unset)"},
		{"  path: out/\n  max_rows_per_file: -5\n", "sink.max_rows_per_file: -5: want at least 1"},
		{"  path: out/\n  max_rows_per_file: 1\n", ""},
		{"  path: out/\n", ""},
		{"  path: \"out/\u202eorders\"\n", `sink.path: "out/\u202eorders" contains the invisible character U+202E: control and formatting characters (bidirectional overrides, zero-width ones) make it read differently in review than it is; type it again`},
		{"  path: \"out/\u2066orders\u2069\"\n", `sink.path: "out/\u2066orders\u2069" contains the invisible character U+2066`},
		{"  url: \"s3://lake/\u202aorders/\"\n", `sink.url: "s3://lake/\u202aorders/" contains the invisible character U+202A`},
		{"  path: out/\n  columns: {\"amount\u202e\": value.amount, id: value.id}\n", `sink.columns: column "amount\u202e" contains the invisible character U+202E`},
		{"  path: out/\n  columns: {amount: value.amount, \"i\u2069d\": value.id}\n", `sink.columns: column "i\u2069d" contains the invisible character U+2069`},
		{"  path: out/\n  columns: {\"montant \u00e9t\u00e9\": value.amount}\n", ""},
		{"  path: out/\n  columns: {amount: value.amount}\n  types: {amount: 'decimal(12,2'}\n", `sink.types: amount: type "decimal(12,2": a decimal's precision and scale close with ')', e.g. decimal(12,2)`},
		{"  path: out/\n  columns: {amount: value.amount}\n  types: {amount: double}\n", `a JSON number is a decimal, which a float would round`},
		{"  path: out/\n  columns: {at: value.at}\n  types: {at: timestamp}\n", `sink.types: at: type "timestamp": want string, bytes, base64, int32, int64, uint64, boolean, decimal(P,S), date, time_millis, time_micros, timestamp_millis or timestamp_micros (did you mean timestamp_millis?)`},
		{"  path: out/\n  columns: {at: value.at}\n  types: {at: timestamps}\n", `type "timestamps": want string, bytes, base64, int32, int64, uint64, boolean, decimal(P,S), date, time_millis, time_micros, timestamp_millis or timestamp_micros`},
	} {
		_, err := parsePlan(tc.sink)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.sink, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q", tc.sink, err, tc.want)
		}
	}
}

// max_rows_per_file unset and written as its default give the fingerprint
// they gave when the field was an int64 (runs recorded in groups resume).
func TestMaxRowsFingerprintUnchanged(t *testing.T) {
	for _, sink := range []string{"  path: out/\n", "  path: out/\n  max_rows_per_file: 1000000\n"} {
		p, err := parsePlan(sink)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Fingerprint(); got != "7233ec03dae44df7" {
			t.Errorf("%q: fingerprint %s, want 7233ec03dae44df7", sink, got)
		}
	}
}

// A sharded run needs {shard} in the path or url, and each shard writes
// its own output; a path with {shard} needs a sharded run.
func TestShardOutputs(t *testing.T) {
	d := parquet.Descriptor
	plain, err := parsePlan("  path: out/\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Shard(&plain.Sink, 1, 3); err == nil || !strings.Contains(err.Error(), "out/shard={shard}/") {
		t.Errorf("shard 1 of 3 without {shard}: %v, want a refusal showing the path with it", err)
	}
	for _, count := range []int{0, 1} {
		if _, err := d.Shard(&plain.Sink, 0, count); err != nil {
			t.Errorf("shard 0 of %d: %v", count, err)
		}
	}
	for _, tc := range []struct{ section, want string }{
		{"  path: out/shard={shard}/\n", "out/shard=2/"},
		{"  url: s3://bucket/orders/{shard}/\n  endpoint: http://127.0.0.1:7070\n", "s3://bucket/orders/2/"},
	} {
		p, err := parsePlan(tc.section)
		if err != nil {
			t.Fatalf("%s: %v", tc.section, err)
		}
		cfg, err := d.Shard(&p.Sink, 2, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.section, err)
		}
		got := cfg.(*parquet.Section)
		if got.Path+got.URL != tc.want {
			t.Errorf("%s: shard 2 writes to %q, want %q", tc.section, got.Path+got.URL, tc.want)
		}
		if _, err := d.Shard(&p.Sink, 0, 0); err == nil || !strings.Contains(err.Error(), "--shard I/N") {
			t.Errorf("%s unsharded: %v, want a refusal", tc.section, err)
		}
	}
}

// The columns of a decoded value's schema (decode.value set, columns
// unset) need a schema that gives its fields types and a value no mapping
// changed; provenance applies to them only.
func TestSchemaColumnsValidation(t *testing.T) {
	const decode = "decode:\n  value: %s\n  schema_registry: {url: http://registry:8081}\n"
	for _, tc := range []struct{ extra, sink, want string }{
		{fmt.Sprintf(decode, "schema_registry"), "  path: out/\n  provenance: true\n", ""},
		{fmt.Sprintf(decode, "avro"), "  path: out/\n", ""},
		{fmt.Sprintf(decode, "json_schema"), "  path: out/\n", "sink.columns: unset, the columns come from the decoded value's schema, and a JSON Schema gives its fields no Parquet types"},
		{fmt.Sprintf(decode, "avro") + "mapping:\n  - drop: [value.debug]\n", "  path: out/\n", "sink.columns: unset, the columns come from the decoded value's schema, which no longer describes a value the mapping changed"},
		{fmt.Sprintf(decode, "avro") + "mapping:\n  - drop: [value.debug]\n", "  path: out/\n  columns: {id: value.id}\n", ""},
		{fmt.Sprintf(decode, "avro"), "  path: out/\n  columns: {id: value.id}\n  provenance: true\n", "sink.provenance: applies to the columns of the decoded value's schema (columns unset)"},
		{"", "  path: out/\n  provenance: true\n", "sink.provenance: applies to the columns of the decoded value's schema (decode.value set, columns unset)"},
	} {
		text := strings.Replace(parquetPlan, "sink:\n", tc.extra+"sink:\n", 1) + tc.sink
		_, err := plan.Parse("plan.yaml", []byte(text), plan.LoadOptions{Sinks: registry.Catalog(),
			Now: func() time.Time { return time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC) }})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s%s: %v", tc.extra, tc.sink, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s%s: got %v, want %q", tc.extra, tc.sink, err, tc.want)
		}
	}
}
