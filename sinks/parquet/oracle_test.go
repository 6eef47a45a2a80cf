package parquet_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// oraclePython is the Python of the oracles' virtualenv with pyarrow and
// duckdb (testenv.OraclePython).
func oraclePython(t *testing.T) string { return testenv.OraclePython(t, "pyarrow", "duckdb") }

// readBack prints, for every row of the objects under dir as pyarrow and
// as DuckDB read them, one JSON line (bytes in hex, null kept), then
// each reader's schema of the first object.
const readBack = `
import json, sys, glob, datetime, pyarrow.parquet as pq, duckdb
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
files = sorted(glob.glob(sys.argv[1] + "/orders/*/*.parquet"))
def h(b):
    return None if b is None else b.hex()
for f in files:
    for r in pq.read_table(f).to_pylist():
        print(json.dumps({"r": "pyarrow", "p": r["partition"], "o": r["offset"], "ms": (r["timestamp"] - EPOCH) // datetime.timedelta(milliseconds=1), "ts": str(r["timestamp"].tzinfo),
            "k": h(r["kafka_key"]), "v": h(r["value"]), "h": r["headers"], "tt": r["timestamp_type"]}))
con = duckdb.connect()
for row in con.execute("select partition, \"offset\", epoch_ms(\"timestamp\"), kafka_key, value, headers from read_parquet(?) order by partition, \"offset\"", [files]).fetchall():
    print(json.dumps({"r": "duckdb", "p": row[0], "o": row[1], "ms": row[2], "k": h(row[3]), "v": h(row[4]), "h": row[5]}))
print("SCHEMA pyarrow", json.dumps(str(pq.read_schema(files[0]))))
print("SCHEMA duckdb", json.dumps(str(con.execute("describe select * from read_parquet(?)", [files[0]]).fetchall())))
`

// pyarrow and DuckDB read every row back as written: coordinates, the
// timestamp in UTC milliseconds, keys and values byte for byte with NULL
// apart from empty, headers.
func TestOraclesReadBack(t *testing.T) {
	py := oraclePython(t)
	dir := t.TempDir()
	window := sinktest.Window(7, 3)
	corpus := sinktest.Corpus()
	for i := range corpus {
		corpus[i].Partition = 3
	}
	window = append(window, corpus)
	s := open(t, parquet.Config{Path: dir, Topic: "orders", MaxRowsPerFile: 9, RunID: "r", Fingerprint: "f", Ranges: ranges(4, 0, 100000)})
	sinktest.WriteAll(t, s, window, 1, 10)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "read.py")
	if err := os.WriteFile(script, []byte(readBack), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, dir).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]record.Record{}
	for _, part := range window {
		for _, r := range part {
			want[fmt.Sprintf("%d@%d", r.Partition, r.Offset)] = r
		}
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "SCHEMA ") {
			t.Log(line)
			continue
		}
		var got struct {
			R, TS, TT string
			P         int32
			O, MS     int64
			K, V, H   *string
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		id := fmt.Sprintf("%d@%d", got.P, got.O)
		w, ok := want[id]
		if !ok {
			t.Fatalf("%s read a row that was not written: %s", got.R, id)
		}
		seen[got.R]++
		if got.R == "pyarrow" && got.TS != "UTC" || got.MS != w.Time.UnixMilli() {
			t.Errorf("%s %s: timestamp %s/%d, want %v", got.R, id, got.TS, got.MS, w.Time)
		}
		if !sameBytes(got.K, w.Key) || !sameBytes(got.V, w.Value) {
			t.Errorf("%s %s: key %v value %.40v, want %q %.40q", got.R, id, deref(got.K), deref(got.V), w.Key, w.Value)
		}
	}
	n := len(want)
	if seen["pyarrow"] != n || seen["duckdb"] != n {
		t.Fatalf("rows read: %v, want %d each", seen, n)
	}
}

func sameBytes(hexed *string, b []byte) bool {
	if hexed == nil || b == nil {
		return hexed == nil && b == nil
	}
	d, err := hex.DecodeString(*hexed)
	return err == nil && slices.Equal(d, b)
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
