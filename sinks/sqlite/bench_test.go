package sqlite_test

import (
	"encoding/base64"
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

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// benchPython is the peer: python3's sqlite3 module (C SQLite) upserting
// the same rows into a table of the same DDL with executemany, in one
// transaction, in WAL mode with synchronous=FULL (the durability the sink
// gives: it syncs the WAL after its commits before a Write returns). It prints
// the seconds from BEGIN to the end of COMMIT; loading the rows is not
// timed.
const benchPython = `
import base64, json, sqlite3, sys, time
db, ddl, upsert, rows_path = sys.argv[1:5]
rows = []
with open(rows_path) as f:
    for line in f:
        r = json.loads(line)
        rows.append(tuple(base64.b64decode(v[1:]) if isinstance(v, str) and v.startswith("\x01") else v for v in r))
con = sqlite3.connect(db, isolation_level=None)
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA synchronous=FULL")
con.execute(ddl)
t0, c0 = time.perf_counter(), time.process_time()
con.execute("BEGIN IMMEDIATE")
con.executemany(upsert, rows)
con.execute("COMMIT")
print(time.perf_counter() - t0, time.process_time() - c0)
`

// benchRecords are n records of ~300 bytes of JSON over 6 partitions, with
// a key and a header, as a topic of orders would hold.
func benchRecords(n int) [][]record.Record {
	parts := make([][]record.Record, 6)
	t0 := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	for i := range n {
		p := i % 6
		v := fmt.Sprintf(`{"id":%d,"customer":{"id":"c-%d","tier":"gold"},"amount":%d.%02d,"currency":"EUR","status":"shipped","items":[{"sku":"sku-%d","qty":%d}],"note":"%s"}`,
			i, i%9973, i%1000, i%100, i%500, i%7+1, strings.Repeat("x", 120))
		parts[p] = append(parts[p], record.Record{Topic: "orders", Partition: int32(p), Offset: int64(len(parts[p])),
			Key: []byte("order-" + strconv.Itoa(i)), Value: []byte(v), Time: t0.Add(time.Duration(i) * time.Millisecond),
			Headers: []record.Header{{Key: "source", Value: []byte("checkout")}}})
	}
	return parts
}

// BenchmarkSQLiteVsExecutemany writes the same 100,000 rows with the sink
// (batches of plan.DefaultBatchSize from 6 partitions at once, as a run
// writes them, each committed before its Write returns, the default
// layout) and with python3's executemany in one transaction, in
// each round, on the same file system; it reports the median of the
// rounds' ratios (python wall ÷ replay wall, above 1: the sink is faster)
// and cpu_ratio, the same for the CPU time each used.
//
//	go test -run '^$' -bench SQLiteVsExecutemany -benchtime 5x ./sinks/sqlite
func BenchmarkSQLiteVsExecutemany(b *testing.B) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("no python3")
	}
	n := 100000
	if v := os.Getenv("REPLAY_BENCH_SQLITE_ROWS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	window := benchRecords(n)
	dir := b.TempDir()
	// The DDL and the rows, as the sink writes them.
	probe, err := sqlite.New(b.Context(), sqlite.Config{Path: filepath.Join(dir, "probe.db"), Table: "orders", CreateTable: true})
	if err != nil {
		b.Fatal(err)
	}
	probe.Close()
	ddl := benchDDL(b, filepath.Join(dir, "probe.db"))
	rowsPath := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(rowsPath, benchRows(window), 0o644); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(dir, "peer.py")
	if err := os.WriteFile(script, []byte(benchPython), 0o644); err != nil {
		b.Fatal(err)
	}
	upsert := `INSERT INTO orders (key, topic, partition, "offset", "timestamp", value, value_bytes, kafka_key, headers) VALUES (?,?,?,?,?,?,?,?,?)
ON CONFLICT (key) DO UPDATE SET topic = excluded.topic, partition = excluded.partition, "offset" = excluded."offset", "timestamp" = excluded."timestamp",
value = excluded.value, value_bytes = excluded.value_bytes, kafka_key = excluded.kafka_key, headers = excluded.headers
WHERE (topic, partition, "offset", "timestamp", value, value_bytes, kafka_key, headers) IS NOT
(excluded.topic, excluded.partition, excluded."offset", excluded."timestamp", excluded.value, excluded.value_bytes, excluded.kafka_key, excluded.headers)`
	var ours, peerCPU, ourCPU, ratios []float64
	b.ResetTimer()
	for round := range b.N {
		// Each side starts with the previous files gone and the page cache
		// written back, so that neither pays for the other's writeback.
		for _, f := range []string{"py.db", "replay.db"} {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(filepath.Join(dir, f+suffix))
			}
		}
		syscall.Sync()
		pdb := filepath.Join(dir, "py.db")
		out, err := exec.Command(py, script, pdb, ddl, upsert, rowsPath).CombinedOutput()
		if err != nil {
			b.Fatalf("python3: %v\n%s", err, out)
		}
		var secs, pcpu float64
		if _, err := fmt.Sscan(string(out), &secs, &pcpu); err != nil {
			b.Fatalf("python3 printed %q", out)
		}
		peerCPU = append(peerCPU, pcpu)

		syscall.Sync()
		s, err := sqlite.New(b.Context(), sqlite.Config{Path: filepath.Join(dir, "replay.db"), Table: "orders", CreateTable: true,
			Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		start, cpu := time.Now(), cpuTime()
		benchWrite(b, s, window, plan.DefaultBatchSize)
		got := s.Outcomes()
		if err := s.Close(); err != nil { // a run ends so: the last checkpoint of the WAL is timed, as the peer's COMMIT times its own
			b.Fatal(err)
		}
		ours = append(ours, time.Since(start).Seconds())
		ourCPU = append(ourCPU, (cpuTime() - cpu).Seconds())
		if got.Inserted != int64(n) {
			b.Fatalf("outcomes %+v, want %d inserted", got, n)
		}
		ratios = append(ratios, secs/ours[round])
		b.Logf("round %d: python3 executemany %.3fs (CPU %.3fs), replay sqlite sink %.3fs (CPU %.3fs): %.2fx", round, secs, pcpu, ours[round], ourCPU[round], secs/ours[round])
	}
	b.StopTimer()
	b.ReportMetric(median(ratios), "ratio_to_executemany")
	b.ReportMetric(float64(n)/median(ours), "rows/s")
	b.ReportMetric(median(peerCPU)/median(ourCPU), "cpu_ratio")
}

// benchWrite writes the partitions' records in batches of size, one
// goroutine per partition, as the runner's workers do.
func benchWrite(b *testing.B, s sinks.Sink, window [][]record.Record, size int) {
	var g errgroup.Group
	for _, part := range window {
		g.Go(func() error {
			for start := 0; start < len(part); start += size {
				if err := s.Write(b.Context(), part[start:min(start+size, len(part))]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func benchDDL(b *testing.B, path string) string {
	db := openSQLite(b, path)
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'orders'`).Scan(&ddl); err != nil {
		b.Fatal(err)
	}
	return ddl
}

// benchRows are the rows the sink writes for window, one JSON array per
// line; bytes are "\x01" + base64.
func benchRows(window [][]record.Record) []byte {
	var out []byte
	blob := func(v []byte) any {
		if v == nil {
			return nil
		}
		return "\x01" + base64.StdEncoding.EncodeToString(v)
	}
	for _, part := range window {
		for i := range part {
			r := &part[i]
			row := []any{sinks.DefaultKey(r), r.Topic, r.Partition, r.Offset, string(encode.AppendTimestamp(nil, r.Time)),
				string(r.Value), blob(r.Value), blob(r.Key), string(encode.AppendHeadersJSON(nil, r.Headers))}
			line, _ := json.Marshal(row)
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSQLiteSinkWrite is the sink's cost per row (ns/op is one row)
// in batches of plan.DefaultBatchSize, for profiles.
func BenchmarkSQLiteSinkWrite(b *testing.B) {
	window := benchRecords(max(b.N, 1))
	s, err := sqlite.New(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "w.db"), Table: "orders", CreateTable: true, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	benchWrite(b, s, window, plan.DefaultBatchSize)
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/row")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
