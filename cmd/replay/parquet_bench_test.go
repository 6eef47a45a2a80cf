//go:build linux

package main

// BenchmarkParquetVsKcatPyarrow measures the parquet sink end to end
// against its peer in the same run: the benchmark's full-day window
// (REPLAY_BENCH_RECORDS records, default 1,000,000, in 6 partitions of an
// embedded broker run as its own process) replayed into one local Parquet
// object per partition (max_rows_per_file: 1000000, zstd), against kcat
// reading the same window as JSONL piped into pyarrow, which writes one
// zstd Parquet file of the same columns and types (`kcat | pyarrow`):
//
//	go test -run '^$' -bench ParquetVsKcatPyarrow -benchtime 5x ./cmd/replay
//
// Columns: id, customer, note (strings), amount (decimal(12,2)), ts (the
// record's timestamp, TIMESTAMP(MILLIS, UTC)), offset (int64). Each round
// runs both, in alternating order, and checks that each wrote every
// record. Reported (median over the rounds; peak RSS as the maximum):
// replay-rec/s, peer-rec/s, x-peer (replay's records/s ÷ the peer's; at or
// above 1: replay is as fast or faster), replay-peak-MiB (VmHWM of the
// replay process) and replay-file-MiB (of its largest resident set
// sampled, the pages mapped from its binary: the rest is the Go runtime's
// memory, under its soft limit). Needs kcat and the oracles' Python with pyarrow
// (scripts/oracles); skipped without them.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchPyarrowConvert is the peer's converter: JSONL lines of kcat's
// {"ts":…,"offset":…,"value":…} on stdin to one zstd Parquet file.
const benchPyarrowConvert = `import sys, pyarrow as pa, pyarrow.json as pj, pyarrow.parquet as pq, pyarrow.compute as pc
tb = pj.read_json(sys.stdin.buffer, read_options=pj.ReadOptions(block_size=1 << 24))
v = tb.column("value")
out = pa.table({"id": pc.struct_field(v, "id"), "customer": pc.struct_field(v, "customer"),
    "amount": pc.struct_field(v, "amount").cast(pa.decimal128(12, 2)), "note": pc.struct_field(v, "note"),
    "ts": tb.column("ts").cast(pa.timestamp("ms", tz="UTC")), "offset": tb.column("offset")})
pq.write_table(out, sys.argv[1], compression="zstd")
print(out.num_rows)
`

func BenchmarkParquetVsKcatPyarrow(b *testing.B) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		b.Skip("kcat is not installed (apt-get install kcat)")
	}
	home, _ := os.UserHomeDir()
	py := filepath.Join(home, ".cache", "replay", "oracles", "bin", "python")
	if d := os.Getenv("REPLAY_ORACLES_DIR"); d != "" {
		py = filepath.Join(d, "bin", "python")
	}
	if exec.Command(py, "-c", "import pyarrow").Run() != nil {
		b.Skipf("no Python with pyarrow at %s: run scripts/oracles", py)
	}
	records := 1_000_000
	if s := os.Getenv("REPLAY_BENCH_RECORDS"); s != "" {
		if records, err = strconv.Atoi(s); err != nil || records < 1 {
			b.Fatalf("REPLAY_BENCH_RECORDS=%q: want a positive number", s)
		}
	}
	dir := b.TempDir()
	bin := benchBuildReplay(b, dir)
	addr := benchStartSandbox(b, bin, records, benchVariant{compression: "none", partitions: 6})
	script := filepath.Join(dir, "convert.py")
	if err := os.WriteFile(script, []byte(benchPyarrowConvert), 0o644); err != nil {
		b.Fatal(err)
	}
	var rates, peers, ratios, rss, files []float64
	round := 0
	for b.Loop() {
		round++
		var r, p benchRun
		if round%2 == 1 {
			p = benchPyarrowPeer(b, kcat, py, script, addr, dir)
			r = benchParquetReplay(b, bin, addr, dir, round)
		} else {
			r = benchParquetReplay(b, bin, addr, dir, round)
			p = benchPyarrowPeer(b, kcat, py, script, addr, dir)
		}
		if r.lines != records || p.lines != records {
			b.Fatalf("round %d: replay wrote %d rows, the peer %d; want %d each", round, r.lines, p.lines, records)
		}
		b.Logf("round %d: replay %.2fs %.0f rec/s %.1f MiB (at the largest sample: anonymous %.1f, the binary's file pages %.1f) | kcat | pyarrow %.2fs %.0f rec/s | %.2fx the peer",
			round, r.elapsed.Seconds(), r.rate(), r.rssMiB, r.anonMiB, r.fileMiB, p.elapsed.Seconds(), p.rate(), r.rate()/p.rate())
		rates, peers = append(rates, r.rate()), append(peers, p.rate())
		ratios, rss, files = append(ratios, r.rate()/p.rate()), append(rss, r.rssMiB), append(files, r.fileMiB)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(benchMedian(rates), "replay-rec/s")
	b.ReportMetric(benchMedian(peers), "peer-rec/s")
	b.ReportMetric(benchMedian(ratios), "x-peer")
	b.ReportMetric(slices.Max(rss), "replay-peak-MiB")
	b.ReportMetric(slices.Max(files), "replay-file-MiB")
	b.Logf("over %d rounds (min / median / max): replay rec/s %s; kcat | pyarrow rec/s %s; x-peer %s; replay peak RSS MiB %s",
		len(rates), benchSpread(rates, "%.0f"), benchSpread(peers, "%.0f"), benchSpread(ratios, "%.2f"), benchSpread(rss, "%.1f"))
}

// benchPyarrowPeer times kcat reading the day window as JSONL into
// pyarrow's converter; lines is the rows pyarrow wrote.
func benchPyarrowPeer(b *testing.B, kcat, py, script, addr, dir string) benchRun {
	b.Helper()
	now := time.Now()
	out := filepath.Join(dir, "peer.parquet")
	defer os.Remove(out)
	pipe := fmt.Sprintf(`%s -C -b %s -t %s -o s@%d -o e@%d -e -q -f '{"ts":%%T,"offset":%%o,"value":%%s}\n' | %s %s %s`,
		kcat, addr, benchTopic, now.Add(-25*time.Hour).UnixMilli(), now.UnixMilli(), py, script, out)
	syscall.Sync()
	start := time.Now()
	got, err := exec.Command("sh", "-c", pipe).Output()
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("kcat | pyarrow: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(got)))
	if err != nil {
		b.Fatalf("kcat | pyarrow printed %q, not its rows", got)
	}
	return benchRun{elapsed: elapsed, lines: n}
}

// benchParquetReplay times a replay of the day window into a fresh Parquet
// output with a fresh plan; lines is the rows its manifest counts.
func benchParquetReplay(b *testing.B, bin, addr, dir string, round int) benchRun {
	b.Helper()
	name := fmt.Sprintf("bench-pq-%d-%d-%d", os.Getpid(), round, time.Now().UnixNano())
	out := filepath.Join(dir, name)
	defer os.RemoveAll(out)
	planFile := filepath.Join(dir, name+".yaml")
	yaml := fmt.Sprintf(`version: 1
name: %s
description: BenchmarkParquetVsKcatPyarrow round %d, the full day into Parquet.
owner: bench
source: {brokers: [%q], topic: %s}
group: replay.%s
window: {from: -25h}
sink:
  type: parquet
  path: %s
  max_rows_per_file: 1000000
  columns: {id: value.id, customer: value.customer, amount: value.amount, note: value.note, ts: timestamp, offset: offset}
  types: {amount: 'decimal(12,2)'}
`, name, round, addr, benchTopic, name, out)
	if err := os.WriteFile(planFile, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(planFile)
	cmd := exec.Command(bin, "run", "--yes", "--log-level", "warn", planFile)
	syscall.Sync()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop, sampled := make(chan struct{}), make(chan benchRSS)
	go func() { sampled <- benchSampleRSS(cmd.Process.Pid, stop) }()
	err := cmd.Wait()
	close(stop)
	hwm := <-sampled
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("replay run: %v", err)
	}
	var m struct {
		Rows int `json:"rows"`
	}
	mb, err := os.ReadFile(filepath.Join(out, "_manifest.json"))
	if err == nil {
		err = json.Unmarshal(mb, &m)
	}
	if err != nil {
		b.Fatalf("the manifest: %v", err)
	}
	return benchRun{elapsed: elapsed, rssMiB: float64(hwm.hwm) / 1024, anonMiB: float64(hwm.anon) / 1024, fileMiB: float64(hwm.file) / 1024, lines: m.Rows}
}
