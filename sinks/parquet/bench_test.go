package parquet_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
)

// benchRows is the benchmark window: one partition of order events, one
// object of max_rows_per_file rows.
const benchRows = 1000000

// orderValue is the value of the benchmark's order i, as the demo seeds
// them.
func orderValue(b []byte, i int) []byte {
	return fmt.Appendf(b, `{"id":"ord-%d","customer":"cust-%d","amount":%d.%02d,"currency":"EUR","status":"paid","items":%d}`,
		i, i%9973, i%5000, i%100, 1+i%7)
}

// peakRSS is the process's peak resident set (VmHWM), in MiB; 0 where
// /proc does not tell.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkParquetMillionRows writes benchRows order records in batches of
// 1000 into one object (typed columns, zstd) and reports rows/s, the
// object's bytes and the process's peak RSS; with the oracles'
// virtualenv, also the time pyarrow takes to convert the same records as
// JSONL with the same columns, and the ratio.
func BenchmarkParquetMillionRows(b *testing.B) {
	for range b.N {
		dir := b.TempDir()
		s, err := parquet.New(context.Background(), parquet.Config{Path: filepath.Join(dir, "out"), Topic: "orders", RunID: "bench", Fingerprint: "bench",
			Ranges: []sinks.Range{{Partition: 0, Start: 0, End: benchRows}}, MaxRowsPerFile: benchRows,
			Columns: plan.Columns{{Name: "id", Field: "value.id"}, {Name: "amount", Field: "value.amount"}, {Name: "status", Field: "value.status"},
				{Name: "ts", Field: "timestamp"}, {Name: "offset", Field: "offset"}},
			Types: map[string]string{"amount": "decimal(12,2)"}})
		if err != nil {
			b.Fatal(err)
		}
		base := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
		batch := make([]record.Record, 1000)
		start := time.Now()
		for off := 0; off < benchRows; off += len(batch) {
			for j := range batch {
				i := off + j
				batch[j] = record.Record{Topic: "orders", Offset: int64(i), Time: base.Add(time.Duration(i) * time.Millisecond), Value: orderValue(batch[j].Value[:0], i)}
			}
			if err := s.Write(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Finish(context.Background()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		m := readManifest(b, filepath.Join(dir, "out"))
		b.ReportMetric(float64(benchRows)/took.Seconds(), "rows/s")
		b.ReportMetric(float64(m.Objects[0].Bytes)/(1<<20), "object-MiB")
		b.ReportMetric(peakRSS(), "peak-RSS-MiB")
		if py := benchPython(); py != "" {
			pyTook := pyarrowConvert(b, py, dir)
			b.ReportMetric(pyTook.Seconds(), "pyarrow-s")
			b.ReportMetric(took.Seconds()/pyTook.Seconds(), "replay/pyarrow")
		}
	}
}

// benchPython is the oracles' Python with pyarrow, or "".
func benchPython() string {
	home, _ := os.UserHomeDir()
	py := filepath.Join(home, ".cache", "replay", "oracles", "bin", "python")
	if exec.Command(py, "-c", "import pyarrow").Run() != nil {
		return ""
	}
	return py
}

// pyarrowConvert writes the benchmark's records as JSONL (value fields and
// the coordinates) and times pyarrow reading it and writing one zstd
// Parquet file of the same columns and types.
func pyarrowConvert(b *testing.B, py, dir string) time.Duration {
	in := filepath.Join(dir, "orders.jsonl")
	f, err := os.Create(in)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	var v []byte
	for i := range benchRows {
		v = orderValue(v[:0], i)
		fmt.Fprintf(w, `{"ts":%d,"offset":%d,"value":%s}`+"\n", 1793700000000+i, i, v)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	script := `
import sys, time, decimal, pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq, pyarrow.compute as pc
t = time.perf_counter()
tb = pj.read_json(sys.argv[1])
v = tb.column("value")
out = pa.table({"id": pc.struct_field(v, "id"), "amount": pc.struct_field(v, "amount").cast(pa.decimal128(12, 2)),
    "status": pc.struct_field(v, "status"), "ts": tb.column("ts").cast(pa.timestamp("ms", tz="UTC")), "offset": tb.column("offset")})
pq.write_table(out, sys.argv[2], compression="zstd")
print(time.perf_counter() - t)
`
	out, err := exec.Command(py, "-c", script, in, filepath.Join(dir, "pyarrow.parquet")).Output()
	if err != nil {
		b.Fatalf("pyarrow: %v: %s", err, out)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}
