package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
)

// Two `replay run --join` processes share a plan; one is killed (SIGKILL:
// no commit, no LeaveGroup) in the middle. The other takes over its
// partitions once the group's session timeout expires and finishes the
// whole window: every record once in the table, every partition committed
// at its end, and a later run has nothing to do.
func TestJoinSurvivesAKilledMember(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	const table = "replay_join"
	sb, seed := newCluster(t, 4, 24000)
	dir := t.TempDir()
	from, to := seed.From.Add(time.Hour), seed.From.Add(23*time.Hour) // 22000 records
	planFile := writePlan(t, dir, planSpec{name: "joined", addr: sb.Addr, from: from, to: to, recordsPerSecond: 1500,
		sink: fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 200}", dsn, table)})
	ranges := filepath.Join(dir, "ranges.json")
	if r := replayProcess(t, dir, "plan", planFile, "--out", ranges); r.code != exitOK {
		t.Fatalf("plan --out: %s", r)
	}
	if r := replayProcess(t, dir, "run", "--yes", "--join", planFile); r.code != exitRefused || !strings.Contains(r.text(), "--resolution") {
		t.Fatalf("--join without the resolution on a fresh group: want exit %d naming --resolution, got %s", exitRefused, r)
	}
	start := func() *process {
		p := startProcess(t, dir, "run", "--yes", "--join", "--resolution", ranges, planFile)
		return p
	}
	rows := func() int {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			return 0 // not created yet
		}
		return n
	}
	// running fails t when p ended: it had to be killed, or to take over.
	running := func(p *process, name string) {
		if p.exited() {
			t.Fatalf("member %s ended too early: %s", name, p.result())
		}
	}
	a := start()
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool { running(a, "a"); return rows() > 0 },
		"member a to write its first rows") // so a is running when b joins
	b := start()
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		running(a, "a")
		running(b, "b")
		return rows() >= 6000
	}, "6000 rows in the table before a is killed")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	case <-time.After(90 * time.Second):
		t.Fatal("the surviving member did not finish within 90 s")
	}
	r := b.result()
	if r.code != exitOK {
		t.Fatalf("surviving member: %s", r)
	}
	if !strings.Contains(r.stderr+r.stdout, `"partitions":[0,1,2,3]`) {
		t.Errorf("the survivor never took all four partitions:\n%s", r.stderr)
	}
	var n, distinct int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT (partition, "offset")) FROM `+table).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	var want int64
	for p, cp := range checkpoints(t, planFile, 4) {
		if !cp.Done() {
			t.Errorf("partition %d: committed %d, range [%d, %d): want its end", p, cp.Offset, cp.Start, cp.End)
		}
		want += cp.End - cp.Start
	}
	if int64(n) != want || int64(distinct) != want {
		t.Errorf("table holds %d rows (%d distinct records), want %d", n, distinct, want)
	}
	if r := replayProcess(t, dir, "run", "--yes", "--join", "--resolution", ranges, planFile); r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
		t.Errorf("a run after the end: want exit 0 and nothing to do, got %s", r)
	}
}
