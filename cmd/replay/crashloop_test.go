package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/testenv"
)

// crashLoopKills is how many runs TestCrashLoop kills per sink: 4 by
// default (a few seconds), REPLAY_CRASH_KILLS for a long soak.
func crashLoopKills(t *testing.T) int {
	v := os.Getenv("REPLAY_CRASH_KILLS")
	if v == "" {
		return 4
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("REPLAY_CRASH_KILLS=%q: want a number of kills", v)
	}
	return n
}

// TestCrashLoop kills `replay run` with SIGKILL at random moments and runs
// it again, over and over, until a run finishes by itself: the sink then
// holds exactly the records kcat reads from the window, each once, and the
// group is at the range ends. For the at-least-once sinks that dedupe on
// resume: the file sink (staged output, published once), PostgreSQL
// (upsert by key, checkpoint table) and the parquet sink (objects named
// from the ranges, read back by pyarrow and DuckDB, key and value bytes
// compared with kcat's, and no object beyond the manifest's).
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	kills := crashLoopKills(t)
	for _, sink := range []string{"file", "postgres", "parquet"} {
		t.Run(sink, func(t *testing.T) {
			t.Parallel()
			testCrashLoop(t, sink, kills)
		})
	}
}

func testCrashLoop(t *testing.T, sinkType string, kills int) {
	// A run lives 0.1-0.6 s before its kill; the window takes about
	// kills*0.25 s at the throttle, so most kills land mid-run.
	records := 4000 * max(kills, 2)
	sb, seed := newCluster(t, 4, records)
	dir := t.TempDir()
	from, to := seed.From.Add(time.Hour), seed.From.Add(23*time.Hour)
	out := filepath.Join(dir, "out", "orders.jsonl")
	var sink, dsn string
	const table = "crash_loop"
	switch sinkType {
	case "file":
		sink = fileSink(out, 200)
	case "postgres":
		dsn = testenv.Postgres(t)
		sink = fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 200}", dsn, table)
	case "parquet":
		testenv.OraclePython(t, "pyarrow", "duckdb")
		out = filepath.Join(dir, "lake")
		sink = fmt.Sprintf("{type: parquet, path: %q, batch_size: 200, max_rows_per_file: 1500}", out)
	}
	planFile := writePlan(t, dir, planSpec{name: "crash-loop-" + sinkType, addr: sb.Addr, from: from, to: to, recordsPerSecond: 12000, sink: sink})
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, from, to)

	seedv := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seedv, 3))
	t.Logf("kill moments seed %d", seedv)
	start := time.Now()
	killed, runs := 0, 0
	for finished := false; !finished; {
		runs++
		p := startProcess(t, dir, "run", "--yes", planFile)
		var timer <-chan time.Time
		if killed < kills {
			timer = time.After(time.Duration(100+rng.IntN(500)) * time.Millisecond)
		}
		select {
		case <-p.done:
			finished = true
		case <-timer:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			if p.cmd.ProcessState.ExitCode() == -1 {
				killed++
			} else {
				finished = true // it ended just before the kill
			}
		}
		if code := p.cmd.ProcessState.ExitCode(); code != -1 && code != exitOK {
			t.Fatalf("run %d exited %d: %s", runs, code, p.stderr)
		}
		if runs > kills+20 {
			t.Fatalf("%d runs and not finished", runs)
		}
	}
	t.Logf("%s sink: %d runs, %d killed, %s in all", sinkType, runs, killed, time.Since(start).Round(time.Millisecond))
	if killed == 0 {
		t.Fatal("no run was killed: the test exercised no crash")
	}
	var got []string
	switch sinkType {
	case "file":
		got = fileCoords(t, out)
	case "parquet":
		got = parquetCoords(t, sb.Addr, out)
	case "postgres":
		rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT partition || '/' || "offset" FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		rows.Close()
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sink holds %d records, kcat reads %d from the window; they differ", len(got), len(want))
	}
	for p, cp := range checkpoints(t, planFile, 4) {
		if !cp.Replay || cp.Offset != cp.End {
			t.Errorf("partition %d: committed %d, want the range end %d", p, cp.Offset, cp.End)
		}
	}
}

// fileCoords returns the partition/offset of each line of a JSONL output.
func fileCoords(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r := gjson.ParseBytes(sc.Bytes())
		out = append(out, fmt.Sprintf("%d/%d", r.Get("partition").Int(), r.Get("offset").Int()))
	}
	return out
}

// parquetRead prints, for every row of the objects the manifest under
// argv[1] lists, "reader partition/offset keyhex valuehex" as pyarrow and
// as DuckDB read it ("-" for NULL), then "objects" and how many .parquet
// files the directory holds.
const parquetRead = `
import json, sys, glob, os, pyarrow.parquet as pq, duckdb
root = sys.argv[1]
names = [o["name"] for o in json.load(open(os.path.join(root, "_manifest.json")))["objects"]]
h = lambda b: "-" if b is None else (b.hex() or "=")
for n in names:
    for r in pq.read_table(os.path.join(root, n)).to_pylist():
        print("pyarrow %d/%d %s %s" % (r["partition"], r["offset"], h(r["kafka_key"]), h(r["value"])))
files = [os.path.join(root, n) for n in names]
for p, o, k, v in duckdb.connect().execute('select partition, "offset", kafka_key, value from read_parquet(?)', [files]).fetchall():
    print("duckdb %d/%d %s %s" % (p, o, h(k), h(v)))
print("objects %d %d" % (len(names), len(glob.glob(os.path.join(root, "*", "*", "*.parquet")))))
`

// parquetCoords reads the parquet output under dir with pyarrow and
// DuckDB and returns the partition/offset of its rows, after checking
// that both readers read the same rows, that each row's key and value
// bytes are kcat's, and that the directory holds the manifest's objects
// and no other.
func parquetCoords(t *testing.T, broker, dir string) []string {
	t.Helper()
	py := testenv.OraclePython(t, "pyarrow", "duckdb")
	out, err := exec.Command(py, "-c", parquetRead, dir).Output()
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	kcat := map[string]string{}
	hex := func(b []byte) string {
		if b == nil {
			return "-"
		}
		if len(b) == 0 {
			return "="
		}
		return fmt.Sprintf("%x", b)
	}
	for _, r := range testenv.KcatRecords(t, broker, "orders", -1) {
		kcat[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = hex(r.Key) + " " + hex(r.Value)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "objects":
			if f[1] != f[2] {
				t.Errorf("the manifest lists %s objects, the directory holds %s", f[1], f[2])
			}
		case len(f) == 4:
			if want := kcat[f[1]]; f[2]+" "+f[3] != want {
				t.Errorf("%s %s: key and value %s %s, kcat's %s", f[0], f[1], f[2], f[3], want)
			}
			rows[f[0]] = append(rows[f[0]], f[1])
		default:
			t.Fatalf("read back: %q", l)
		}
	}
	a, d := slices.Sorted(slices.Values(rows["pyarrow"])), slices.Sorted(slices.Values(rows["duckdb"]))
	if !slices.Equal(a, d) {
		t.Errorf("pyarrow read %d rows, DuckDB %d; they differ", len(a), len(d))
	}
	return rows["pyarrow"]
}
