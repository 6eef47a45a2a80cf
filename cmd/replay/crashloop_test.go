package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
// resume: the file sink (staged output, published once) and PostgreSQL
// (upsert by key, checkpoint table).
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	kills := crashLoopKills(t)
	for _, sink := range []string{"file", "postgres"} {
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
