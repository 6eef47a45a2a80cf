package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
)

// expiredEnv is a plan with an open-ended window (no to: the high
// watermark at resolution) into a postgres table with a checkpoint table.
type expiredEnv struct {
	sb       *testenv.Kafka
	dir      string
	planFile string
	conn     *pgx.Conn
	table    string
	seed     sandbox.Seed
}

func newExpiredEnv(t *testing.T, n int) *expiredEnv {
	t.Helper()
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	sb, seed := newCluster(t, 3, n)
	e := &expiredEnv{sb: sb, dir: t.TempDir(), conn: conn, table: "replay_expired", seed: seed}
	e.planFile = filepath.Join(e.dir, "expired.yaml")
	body := fmt.Sprintf(`version: 1
name: expired
source: {brokers: [%q], topic: orders}
group: replay.expired
window: {from: %s}
throttle: {records_per_second: 1500}
sink: {type: postgres, dsn: %q, table: %s, create_table: true, checkpoint_table: replay_expired_ckpt, batch_size: 50}
`, sb.Addr, seed.From.Format(time.RFC3339), dsn, e.table)
	if err := os.WriteFile(e.planFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *expiredEnv) rows(t *testing.T) (rows, keys int) {
	t.Helper()
	if err := e.conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT key) FROM "+e.table).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	return rows, keys
}

// sinkCheckpoints sums the next offsets of the checkpoint table.
func (e *expiredEnv) sinkCheckpoints(t *testing.T) map[int32]int64 {
	t.Helper()
	rs, err := e.conn.Query(t.Context(), `SELECT "partition", "next_offset" FROM replay_expired_ckpt`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	var p int32
	var next int64
	if _, err := pgx.ForEachRow(rs, []any{&p, &next}, func() error { out[p] = next; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// interrupted runs the plan until the sink holds at least min rows, then
// stops it with SIGINT (it commits its in-flight batch and exits 1).
func (e *expiredEnv) interrupted(t *testing.T, min int) {
	t.Helper()
	p := startProcess(t, e.dir, "run", "--yes", e.planFile)
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended before it was interrupted: %s", p.result())
		}
		var n int
		if err := e.conn.QueryRow(t.Context(), "SELECT count(*) FROM "+e.table).Scan(&n); err != nil {
			return false // not created yet
		}
		return n >= min
	}, "the run never wrote %d rows", min)
	p.cmd.Process.Signal(os.Interrupt)
	if r := p.result(); r.code != exitFailed || !strings.Contains(r.text(), "resume with") {
		t.Fatalf("interrupted run: %s", r)
	}
}

// deleteGroup deletes the replay group (DeleteGroups), as Kafka's expiry
// of an empty group's offsets leaves it: no commit at all.
func (e *expiredEnv) deleteGroup(t *testing.T) {
	t.Helper()
	resp, err := e.sb.Admin(t).DeleteGroup(t.Context(), "replay.expired")
	if err != nil || resp.Err != nil {
		t.Fatalf("delete group: %v %v", err, resp.Err)
	}
	for p, cp := range checkpoints(t, e.planFile, 3) {
		if cp.Offset >= 0 {
			t.Fatalf("partition %d still committed at %d after the group was deleted", p, cp.Offset)
		}
	}
}

type reportTotals struct {
	Partitions []struct {
		Partition  int32
		Start, End int64
		From       int64
		Written    int64
	}
}

func readReportTotals(t *testing.T, path string) (rep reportTotals, written int64) {
	t.Helper()
	if err := json.Unmarshal(readFile(t, path), &rep); err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Partitions {
		written += p.Written
	}
	return rep, written
}

// TestExpiredOffsetsRefusedThenResumedFromSink: a run is interrupted, the
// topic grows, and the group's offsets disappear (deleted, as Kafka expires
// them). The next run is refused (exit 3) naming the group, the partitions
// and the recorded offsets; --resume-from-sink finishes the first run's
// ranges (never the grown topic) writing only what the sink lacked; a
// later loss of the group is refused again, and --restart replays the
// recorded ranges from their start.
func TestExpiredOffsetsRefusedThenResumedFromSink(t *testing.T) {
	e := newExpiredEnv(t, 3000)
	e.interrupted(t, 600)
	before := checkpoints(t, e.planFile, 3)
	// The topic grows: a fresh resolution of the open-ended window would
	// be wider than the one the first run fixed.
	now := time.Now().UTC()
	e.sb.Seed(t, sandbox.Seed{Topic: "orders", N: 300, From: now.Add(-time.Minute), To: now})
	e.deleteGroup(t)

	r := replayProcess(t, e.dir, "run", "--yes", e.planFile)
	if r.code != exitRefused {
		t.Fatalf("run after the group lost its offsets: want exit %d, got %s", exitRefused, r)
	}
	msg := r.text()
	for _, want := range []string{`refusing group "replay.expired"`, "offsets.retention.minutes", "partitions [0 1 2] of orders", "the local run record", "--resume-from-sink", "--restart"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, msg)
		}
	}
	for p, cp := range before {
		if want := fmt.Sprintf("%d [%d, %d) at %d", p, cp.Start, cp.End, cp.Offset); !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name partition %d's recorded range and offset %q:\n%s", p, want, msg)
		}
	}
	t.Logf("refusal: %s", strings.TrimSpace(msg))
	if code, out, errs := groupTestExec(t, "status", e.planFile); code != exitOK || !strings.Contains(out, "state: commits lost: group replay.expired has no commit on orders, but the local run record") ||
		!strings.Contains(out, "--resume-from-sink") {
		t.Errorf("status of a group that lost its commits: exit %d:\n%s%s", code, out, errs)
	}
	if rows, _ := e.rows(t); rows == 0 {
		t.Fatal("the sink is empty")
	}
	for p, cp := range checkpoints(t, e.planFile, 3) {
		if cp.Offset >= 0 {
			t.Errorf("the refused run committed partition %d at %d", p, cp.Offset)
		}
	}

	sinkAt := e.sinkCheckpoints(t)
	report := filepath.Join(e.dir, "resume.json")
	if r := replayProcess(t, e.dir, "run", "--yes", "--resume-from-sink", "--report", report, e.planFile); r.code != exitOK {
		t.Fatalf("--resume-from-sink: %s", r)
	}
	rep, written := readReportTotals(t, report)
	var want int64
	for _, p := range rep.Partitions {
		b := before[p.Partition]
		if p.Start != b.Start || p.End != b.End {
			t.Errorf("partition %d: resumed range [%d, %d), want the first run's [%d, %d)", p.Partition, p.Start, p.End, b.Start, b.End)
		}
		if p.From != sinkAt[p.Partition] {
			t.Errorf("partition %d: resumed from %d, want the sink's checkpoint %d", p.Partition, p.From, sinkAt[p.Partition])
		}
		want += p.End - sinkAt[p.Partition]
	}
	if written != want {
		t.Errorf("--resume-from-sink wrote %d records, want %d (the rest of the ranges after the sink's checkpoints)", written, want)
	}
	if rows, keys := e.rows(t); rows != 3000 || keys != 3000 {
		t.Errorf("the table has %d rows (%d keys), want the 3000 records of the first run's ranges", rows, keys)
	}
	for p, cp := range checkpoints(t, e.planFile, 3) {
		if !cp.Done() || cp.End != before[p].End {
			t.Errorf("partition %d: committed %d of [%d, %d), want the first run's end %d", p, cp.Offset, cp.Start, cp.End, before[p].End)
		}
	}

	// Lost again, after the plan finished: refused again; --restart
	// replays the recorded ranges (not the grown topic) from their start.
	e.deleteGroup(t)
	if r := replayProcess(t, e.dir, "run", "--yes", e.planFile); r.code != exitRefused || !strings.Contains(r.text(), "offsets.retention.minutes") {
		t.Fatalf("run of a finished plan whose group lost its offsets: want exit %d, got %s", exitRefused, r)
	}
	report = filepath.Join(e.dir, "restart.json")
	if r := replayProcess(t, e.dir, "run", "--yes", "--restart", "--report", report, e.planFile); r.code != exitOK {
		t.Fatalf("--restart: %s", r)
	}
	rep, written = readReportTotals(t, report)
	if written != 3000 {
		t.Errorf("--restart wrote %d records, want the 3000 of the recorded ranges", written)
	}
	for _, p := range rep.Partitions {
		if b := before[p.Partition]; p.Start != b.Start || p.End != b.End || p.From != b.Start {
			t.Errorf("partition %d: --restart ran [%d, %d) from %d, want the recorded [%d, %d) from its start", p.Partition, p.Start, p.End, p.From, b.Start, b.End)
		}
	}
	// After a reset, the next run resolves the window afresh (the grown
	// topic): the user asked for it.
	if r := replayProcess(t, e.dir, "reset", "--yes", e.planFile); r.code != exitOK {
		t.Fatalf("reset: %s", r)
	}
	if r := replayProcess(t, e.dir, "run", "--yes", e.planFile); r.code != exitOK {
		t.Fatalf("run after a reset: %s", r)
	}
	if rows, _ := e.rows(t); rows != 3300 {
		t.Errorf("after a reset and a fresh run the table has %d rows, want 3300", rows)
	}
}

// TestExpiredOffsetsSinkTableOnly: on a machine without the run record
// (another state directory), the sink's checkpoint table alone makes the
// run refuse a group whose offsets were deleted (partition by partition,
// OffsetDelete) for a window that resolves to the same ranges;
// --resume-from-sink continues from it.
func TestExpiredOffsetsSinkTableOnly(t *testing.T) {
	e := newExpiredEnv(t, 3000)
	e.interrupted(t, 600)
	before := checkpoints(t, e.planFile, 3)
	set := kadm.TopicsSet{}
	set.Add("orders", 0, 1, 2)
	resp, err := e.sb.Admin(t).DeleteOffsets(t.Context(), "replay.expired", set)
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, resp.Error())
	}
	other := t.TempDir()
	t.Setenv(stateEnv, other) // the child processes: a machine without the record
	r := replayProcess(t, e.dir, "run", "--yes", e.planFile)
	if r.code != exitRefused || !strings.Contains(r.text(), "the sink's checkpoint table replay_expired_ckpt records progress") ||
		!strings.Contains(r.text(), "offsets.retention.minutes") {
		t.Fatalf("run without the record: want exit %d naming the sink's checkpoint table, got %s", exitRefused, r)
	}
	t.Logf("refusal: %s", strings.TrimSpace(r.text()))
	sinkAt := e.sinkCheckpoints(t)
	report := filepath.Join(e.dir, "resume.json")
	if r := replayProcess(t, e.dir, "run", "--yes", "--resume-from-sink", "--report", report, e.planFile); r.code != exitOK {
		t.Fatalf("--resume-from-sink: %s", r)
	}
	_, written := readReportTotals(t, report)
	var want int64
	for p, cp := range before {
		want += cp.End - sinkAt[p]
	}
	if written != want {
		t.Errorf("--resume-from-sink wrote %d records, want %d", written, want)
	}
	if rows, keys := e.rows(t); rows != 3000 || keys != 3000 {
		t.Errorf("the table has %d rows (%d keys), want 3000", rows, keys)
	}
}

// TestExpiredOffsetsOnePartition: the commit of one partition is deleted
// (OffsetDelete) while the others stay: the run is refused naming that
// partition only, and --resume-from-sink takes it back with its recorded
// range and finishes exactly.
func TestExpiredOffsetsOnePartition(t *testing.T) {
	e := newExpiredEnv(t, 3000)
	e.interrupted(t, 600)
	before := checkpoints(t, e.planFile, 3)
	set := kadm.TopicsSet{}
	set.Add("orders", 1)
	resp, err := e.sb.Admin(t).DeleteOffsets(t.Context(), "replay.expired", set)
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, resp.Error())
	}
	r := replayProcess(t, e.dir, "run", "--yes", e.planFile)
	want := "no commits for partitions [1] of orders, but the local run record"
	if r.code != exitRefused || !strings.Contains(r.text(), want) || !strings.Contains(r.text(), fmt.Sprintf("1 [%d, %d) at ", before[1].Start, before[1].End)) {
		t.Fatalf("run with partition 1's commit deleted: want exit %d with %q, got %s", exitRefused, want, r)
	}
	sinkAt := e.sinkCheckpoints(t)
	report := filepath.Join(e.dir, "resume.json")
	if r := replayProcess(t, e.dir, "run", "--yes", "--resume-from-sink", "--report", report, e.planFile); r.code != exitOK {
		t.Fatalf("--resume-from-sink: %s", r)
	}
	rep, written := readReportTotals(t, report)
	var left int64
	for p, cp := range before {
		left += cp.End - max(cp.Offset, sinkAt[p])
	}
	if len(rep.Partitions) != 3 || written != left {
		t.Errorf("--resume-from-sink ran %d partitions and wrote %d records, want 3 and %d", len(rep.Partitions), written, left)
	}
	if rows, keys := e.rows(t); rows != 3000 || keys != 3000 {
		t.Errorf("the table has %d rows (%d keys), want 3000", rows, keys)
	}
	for p, cp := range checkpoints(t, e.planFile, 3) {
		if !cp.Done() || cp.End != before[p].End {
			t.Errorf("partition %d: committed %d of [%d, %d), want its end %d", p, cp.Offset, cp.Start, cp.End, before[p].End)
		}
	}
}
