package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
)

// schedT0 is the start of the seeded records and of the test schedules.
var schedT0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// scheduleSetup seeds n records over [from, to) in 3 partitions and writes
// a plan with the schedule window (YAML flow mapping) into a sqlite sink.
func scheduleSetup(t *testing.T, n int, from, to time.Time, window string, extra ...string) (sb *testenv.Kafka, dir, planFile, db string) {
	t.Helper()
	sb = testenv.NewKafka(t, testenv.Partitions(3), testenv.Topics("orders"))
	sb.Seed(t, sandbox.Seed{Topic: "orders", N: n, From: from, To: to})
	dir = t.TempDir()
	db = filepath.Join(dir, "out.db")
	body := fmt.Sprintf(`version: 1
name: hourly
source: {brokers: [%q], topic: orders}
group: replay.hourly
window: %s
sink: {type: sqlite, path: %q, table: orders, create_table: true, batch_size: 50}
%s
`, sb.Addr, window, db, strings.Join(extra, "\n"))
	planFile = filepath.Join(dir, "hourly.yaml")
	if err := os.WriteFile(planFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return sb, dir, planFile, db
}

// runReport is the part of a schedule run's --report the tests read.
type runReport struct {
	Intervals []struct {
		Start, End time.Time
		Read       int64
		Report     struct {
			Partitions []struct {
				Partition  int32
				Start, End int64
			}
		}
	}
	NextDue  time.Time `json:"next_due"`
	ExitCode *int      `json:"exit_code"`
}

func readRunReport(t *testing.T, path string) runReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r runReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// coords expands an interval's ranges to "partition/offset" (the seeded
// topic has no gaps), sorted.
func coords(parts []struct {
	Partition  int32
	Start, End int64
}) []string {
	var out []string
	for _, p := range parts {
		for o := p.Start; o < p.End; o++ {
			out = append(out, fmt.Sprintf("%d/%d", p.Partition, o))
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// sinkKeys returns the keys the sqlite sink holds, sorted, with a count of
// rows per key above 1 (none expected: the key is the primary key).
func sinkKeys(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key FROM orders ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, strings.TrimPrefix(k, "orders/"))
	}
	return sorted(keys)
}

// TestScheduleHourByHour runs an hourly schedule over 30 hours of records
// with --at moving an hour at a time, as a scheduler passing its logical
// date would: each invocation replays exactly the interval that just
// became due, its records are what kcat reads for that hour, and together
// the invocations replay every record once.
func TestScheduleHourByHour(t *testing.T) {
	const hours = 30
	sb, dir, planFile, db := scheduleSetup(t, 1500, schedT0, schedT0.Add(hours*time.Hour),
		fmt.Sprintf("{every: 1h, zone: UTC, start: %s}", schedT0.Format(time.RFC3339)))
	var union []string
	for k := 1; k <= hours; k++ {
		at := schedT0.Add(time.Duration(k) * time.Hour)
		rep := filepath.Join(dir, fmt.Sprintf("r%d.json", k))
		res := replay(t, "run", planFile, "--yes", "--at", at.Format(time.RFC3339), "--report", rep)
		if res.code != 0 {
			t.Fatalf("hour %d: %s", k, res)
		}
		if k == 1 || k == hours {
			t.Logf("replay run %s --yes --at %s --report %s\n%s", filepath.Base(planFile), at.Format(time.RFC3339), filepath.Base(rep), res.stdout)
		}
		r := readRunReport(t, rep)
		if len(r.Intervals) != 1 {
			t.Fatalf("hour %d: %d intervals ran, want 1\n%s", k, len(r.Intervals), res)
		}
		iv := r.Intervals[0]
		if !iv.Start.Equal(at.Add(-time.Hour)) || !iv.End.Equal(at) {
			t.Fatalf("hour %d: ran [%s, %s), want the hour before %s", k, iv.Start, iv.End, at)
		}
		got := coords(iv.Report.Partitions)
		end := at
		if k == hours {
			end = at.Add(time.Hour) // no record is later: the interval ends at the last one
		}
		if want := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, iv.Start, end)); !slices.Equal(got, want) {
			t.Fatalf("hour %d: replayed %d offsets, kcat reads %d in [%s, %s)", k, len(got), len(want), iv.Start, end)
		}
		union = append(union, got...)
		if want := fmt.Sprintf("next interval [%s, ...) due at %s", at.Format(time.RFC3339), at.Add(time.Hour).Format(time.RFC3339)); !strings.Contains(res.stdout, want) {
			t.Fatalf("hour %d: want %q in\n%s", k, want, res.stdout)
		}
		// The same logical date again (a retried task): nothing is due.
		if k == 2 {
			again := replay(t, "run", planFile, "--yes", "--at", at.Format(time.RFC3339))
			if again.code != 0 || !strings.Contains(again.stdout, "nothing due: next interval ["+at.Format(time.RFC3339)) {
				t.Fatalf("retried hour %d: %s", k, again)
			}
		}
	}
	union = sorted(union)
	if want := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, schedT0, schedT0.Add((hours+1)*time.Hour))); !slices.Equal(union, want) {
		t.Fatalf("the intervals replayed %d offsets, kcat reads %d", len(union), len(want))
	}
	if got := slices.Compact(slices.Clone(union)); len(got) != len(union) {
		t.Fatalf("an offset was replayed by two intervals")
	}
	if keys := sinkKeys(t, db); !slices.Equal(keys, union) {
		t.Fatalf("the sink holds %d keys, the intervals replayed %d", len(keys), len(union))
	}
}

// sinkRows dumps every row of the sqlite sink, in key order.
func sinkRows(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, partition, "offset", "timestamp", value FROM orders ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, ts, v string
		var p, o int64
		if err := rows.Scan(&k, &p, &o, &ts, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(k, p, o, ts, v))
	}
	return out
}

// TestScheduleCatchUpCrash: three missed invocations are caught up by one,
// in order; killed (SIGKILL) in the middle of the second interval, the
// next invocation (once the killed one's hold lapsed) finishes that interval from its commits, then the third,
// and the sink holds every record of the three hours once.
func TestScheduleCatchUpCrash(t *testing.T) {
	sb, dir, planFile, db := scheduleSetup(t, 15000, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 1h, start: %s}", schedT0.Format(time.RFC3339)), "throttle: {records_per_second: 6000}")
	at := schedT0.Add(3 * time.Hour).Format(time.RFC3339)
	p := startProcess(t, dir, "run", planFile, "--yes", "--at", at)
	second := schedT0.Add(time.Hour)
	testenv.Eventually(t, 30*time.Second, 5*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended before it was killed:\n%s%s", p.stdout, p.stderr)
		}
		for _, cp := range checkpoints(t, planFile, 3) {
			if cp.Interval.Equal(second) && cp.Offset > cp.Start+200 {
				return true
			}
		}
		return false
	}, "the second interval never got going")
	if err := p.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if !strings.Contains(p.stdout.String(), "interval 1 of 3 due") || !strings.Contains(p.stdout.String(), "interval 2 of 3 due") {
		t.Fatalf("the first invocation did not catch up in order:\n%s", p.stdout)
	}
	st := replay(t, "status", planFile, "--at", at)
	for _, want := range []string{"[2026-11-29T01:00:00Z, 2026-11-29T02:00:00Z)  running (or interrupted)", "[2026-11-29T02:00:00Z, 2026-11-29T03:00:00Z)  due since 2026-11-29T03:00:00Z",
		"[2026-11-29T03:00:00Z, 2026-11-29T04:00:00Z)  not yet due (due at 2026-11-29T04:00:00Z)"} {
		if st.code != 0 || !strings.Contains(st.stdout, want) {
			t.Fatalf("status after the kill: want %q in\n%s", want, st)
		}
	}
	t.Logf("replay status after the kill:\n%s", st.stdout)
	rep := filepath.Join(dir, "rerun.json")
	// The killed run holds the group until its session times out.
	var res result
	testenv.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
		res = replay(t, "run", planFile, "--yes", "--at", at, "--report", rep)
		return res.code != 3 || !strings.Contains(res.stderr, "a run of this plan holds it")
	}, "the killed run's hold never lapsed")
	if res.code != 0 || !strings.Contains(res.stdout, "ran 2 intervals") {
		t.Fatalf("re-run: %s", res)
	}
	r := readRunReport(t, rep)
	if len(r.Intervals) != 2 || !r.Intervals[0].Start.Equal(second) || !r.Intervals[1].Start.Equal(second.Add(time.Hour)) {
		t.Fatalf("re-run ran %+v, want the second then the third interval", r.Intervals)
	}
	var resumed int64
	for _, p := range r.Intervals[0].Report.Partitions {
		resumed += p.End - p.Start
	}
	if r.Intervals[0].Read >= resumed {
		t.Fatalf("the second interval was read again from its start (%d of %d offsets), not resumed", r.Intervals[0].Read, resumed)
	}
	want := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, schedT0, schedT0.Add(4*time.Hour)))
	if keys := sinkKeys(t, db); !slices.Equal(keys, want) {
		t.Fatalf("the sink holds %d keys, kcat reads %d", len(keys), len(want))
	}
	var union []string
	for _, iv := range r.Intervals {
		union = append(union, coords(iv.Report.Partitions)...)
	}
	if got := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, second, schedT0.Add(4*time.Hour))); !slices.Equal(sorted(union), got) {
		t.Fatalf("the re-run's ranges hold %d offsets, kcat reads %d after the first interval", len(union), len(got))
	}
}

// TestScheduleIntervalRerun: --interval re-runs a past interval into the
// idempotent sink under its own group: the sink and the schedule's
// progress are unchanged. --max-intervals bounds the catch-up.
func TestScheduleIntervalRerun(t *testing.T) {
	_, dir, planFile, db := scheduleSetup(t, 300, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 1h, start: %s}", schedT0.Format(time.RFC3339)))
	at := schedT0.Add(3 * time.Hour).Format(time.RFC3339)
	res := replay(t, "run", planFile, "--yes", "--at", at, "--max-intervals", "2", "--report", filepath.Join(dir, "first.json"))
	if res.code != 0 || !strings.Contains(res.stdout, "ran 2 intervals; next interval [2026-11-29T02:00:00Z, ...) is already due") {
		t.Fatalf("--max-intervals 2: %s", res)
	}
	first := readRunReport(t, filepath.Join(dir, "first.json"))
	if first.ExitCode == nil || *first.ExitCode != exitOK {
		t.Errorf("--max-intervals 2: the report's exit_code is %v, want %d", first.ExitCode, exitOK)
	}
	if res = replay(t, "run", planFile, "--yes", "--at", at); res.code != 0 || !strings.Contains(res.stdout, "ran 1 interval;") {
		t.Fatalf("the rest of the catch-up: %s", res)
	}
	rows, progress := sinkRows(t, db), checkpoints(t, planFile, 3)
	rep := filepath.Join(dir, "rerun.json")
	res = replay(t, "run", planFile, "--yes", "--at", at, "--interval", "2026-11-29T01:30:00Z", "--report", rep)
	if res.code != 0 || !strings.Contains(res.stdout, "re-ran interval [2026-11-29T01:00:00Z, 2026-11-29T02:00:00Z) in group replay.hourly.interval-20261129T010000Z; the schedule's progress is unchanged") {
		t.Fatalf("--interval: %s", res)
	}
	r := readRunReport(t, rep)
	if len(r.Intervals) != 1 || r.Intervals[0].Read == 0 || !slices.Equal(coords(r.Intervals[0].Report.Partitions), coords(first.Intervals[1].Report.Partitions)) {
		t.Fatalf("the re-run replayed %+v, want the second interval's ranges %+v", r.Intervals, first.Intervals[1])
	}
	if got := sinkRows(t, db); !slices.Equal(got, rows) {
		t.Fatalf("the re-run changed the sink: %d rows, %d before", len(got), len(rows))
	}
	if got := checkpoints(t, planFile, 3); !maps.Equal(got, progress) {
		t.Fatalf("the re-run moved the schedule's progress:\n%v\nbefore:\n%v", got, progress)
	}
	if res = replay(t, "run", planFile, "--yes", "--at", at); res.code != 0 || !strings.Contains(res.stdout, "nothing due: next interval [2026-11-29T03:00:00Z, ...) due at 2026-11-29T04:00:00Z") {
		t.Fatalf("after the re-run: %s", res)
	}
	if res = replay(t, "run", planFile, "--yes", "--at", at, "--interval", "2026-11-29T05:00:00Z"); res.code != 1 || !strings.Contains(res.stderr, "not due until") {
		t.Fatalf("--interval in the future: %s", res)
	}
}

// TestScheduleDaysAcrossDST: daily intervals in Europe/Berlin across the
// end of summer time (2026-10-25 has 25 hours there): the day replays its
// 25 hours of records, the next day its 24, none lost or doubled.
func TestScheduleDaysAcrossDST(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	dayStart := time.Date(2026, 10, 25, 0, 0, 0, 0, berlin)
	from := dayStart.Add(-2 * time.Hour)
	sb, dir, planFile, db := scheduleSetup(t, 5000, from, from.Add(50*time.Hour),
		"{every: 1d, zone: Europe/Berlin, start: 2026-10-25T00:00:00+02:00}")
	var union []string
	for i, at := range []string{"2026-10-26T00:00:00+01:00", "2026-10-27T00:00:00+01:00"} {
		rep := filepath.Join(dir, fmt.Sprintf("d%d.json", i))
		res := replay(t, "run", planFile, "--yes", "--at", at, "--report", rep)
		if res.code != 0 {
			t.Fatal(res)
		}
		iv := readRunReport(t, rep).Intervals[0]
		if want := []time.Duration{25 * time.Hour, 24 * time.Hour}[i]; iv.End.Sub(iv.Start) != want {
			t.Fatalf("day %d lasts %s, want %s", i, iv.End.Sub(iv.Start), want)
		}
		got := coords(iv.Report.Partitions)
		if want := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, iv.Start, iv.End)); !slices.Equal(got, want) {
			t.Fatalf("day %d: replayed %d offsets, kcat reads %d in [%s, %s)", i, len(got), len(want), iv.Start, iv.End)
		}
		union = append(union, got...)
	}
	want := sorted(testenv.KcatCoords(t, sb.Addr, "orders", -1, dayStart, dayStart.Add(48*time.Hour)))
	if keys := sinkKeys(t, db); !slices.Equal(keys, want) || !slices.Equal(sorted(union), want) {
		t.Fatalf("the two days replayed %d offsets (sink %d keys), kcat reads %d", len(union), len(keys), len(want))
	}
}

// TestScheduleDelay: with delay: 10m an interval is not run before its end
// plus 10 minutes (late producers).
func TestScheduleDelay(t *testing.T) {
	_, _, planFile, _ := scheduleSetup(t, 100, schedT0, schedT0.Add(2*time.Hour),
		fmt.Sprintf("{every: 1h, start: %s, delay: 10m}", schedT0.Format(time.RFC3339)))
	res := replay(t, "run", planFile, "--yes", "--at", "2026-11-29T01:09:59Z")
	if res.code != 0 || !strings.Contains(res.stdout, "nothing due: next interval [2026-11-29T00:00:00Z, ...) due at 2026-11-29T01:10:00Z") {
		t.Fatalf("before the delay: %s", res)
	}
	if res = replay(t, "run", planFile, "--yes", "--at", "2026-11-29T01:10:00Z"); res.code != 0 || !strings.Contains(res.stdout, "ran 1 interval; next interval [2026-11-29T01:00:00Z, ...) due at 2026-11-29T02:10:00Z") {
		t.Fatalf("at the delay: %s", res)
	}
}

// Found by a new user: replay plan resolved a schedule as a one-off window
// and said "nothing to do" (exit 0 under --detailed-exitcode) while
// intervals were due. It lists the intervals and exits 2 while one is due.
func TestPlanSchedule(t *testing.T) {
	_, _, planFile, _ := scheduleSetup(t, 300, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 1h, zone: UTC, start: %s}", schedT0.Format(time.RFC3339)))
	at := schedT0.Add(2 * time.Hour).Format(time.RFC3339)
	res := replay(t, "plan", planFile, "--detailed-exitcode", "--at", at)
	if res.code != exitInvalid || !strings.Contains(res.stdout, "due since") || strings.Contains(res.text(), "nothing to do") {
		t.Fatalf("two due intervals: want exit 2 listing them, got %s", res)
	}
	if r := replay(t, "run", planFile, "--yes", "--at", at); r.code != 0 {
		t.Fatal(r)
	}
	res = replay(t, "plan", planFile, "--detailed-exitcode", "--at", at)
	if res.code != 0 || !strings.Contains(res.stdout, "done") || !strings.Contains(res.stdout, "not yet due") {
		t.Fatalf("nothing due: want exit 0 with the intervals, got %s", res)
	}
	if r := replay(t, "plan", planFile, "--out", filepath.Join(t.TempDir(), "r.json"), "--at", at); r.code != exitInvalid || !strings.Contains(r.text(), "is a schedule") {
		t.Fatalf("--out on a schedule: want a usage error, got %s", r)
	}
}

// replay plan of a schedule with more due intervals than it lists counts
// the rest and names the first one not yet due (under a delay, the one
// holding the clock less the delay).
func TestPlanScheduleManyDue(t *testing.T) {
	_, _, planFile, _ := scheduleSetup(t, 300, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 15m, zone: UTC, start: %s, delay: 10m}", schedT0.Format(time.RFC3339)))
	res := replay(t, "plan", planFile, "--at", schedT0.Add(3*time.Hour+5*time.Minute).Format(time.RFC3339))
	for _, want := range []string{"... 6 more", "[2026-11-29T02:45:00Z, 2026-11-29T03:00:00Z)  not yet due (due at 2026-11-29T03:10:00Z)"} {
		if !strings.Contains(res.stdout, want) {
			t.Fatalf("want %q in\n%s", want, res)
		}
	}
}

// A 12-hour schedule in New York over the day clocks go back: its second
// interval is midnight to noon there, 13 hours, and the catch-up ends
// (the interval was misaligned, recorded done under another, and run
// again without end).
func TestScheduleAcrossFallBack(t *testing.T) {
	from := time.Date(2026, 10, 31, 16, 0, 0, 0, time.UTC) // noon in New York
	_, dir, planFile, _ := scheduleSetup(t, 360, from, from.Add(36*time.Hour),
		fmt.Sprintf("{every: 12h, zone: America/New_York, start: %s}", from.Format(time.RFC3339)))
	report := filepath.Join(dir, "report.json")
	done := make(chan result, 1)
	go func() {
		done <- replay(t, "run", planFile, "--yes", "--report", report, "--at", from.Add(26*time.Hour).Format(time.RFC3339))
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the catch-up did not end")
	}
	if res.code != exitOK || !strings.Contains(res.stdout, "ran 2 intervals") {
		t.Fatalf("want the two due intervals, got %s", res)
	}
	r := readRunReport(t, report)
	if iv := r.Intervals[1]; !iv.Start.Equal(from.Add(12*time.Hour)) || iv.End.Sub(iv.Start) != 13*time.Hour {
		t.Fatalf("second interval [%s, %s), want midnight to noon in New York, 13 hours", iv.Start, iv.End)
	}
}

// A schedule's run stopped in an interval says once how to resume it: the
// same invocation, its --at, --max-intervals and --report included (without
// --at, the resumed catch-up would run to the clock's now).
func TestScheduleResumeHint(t *testing.T) {
	_, dir, planFile, _ := scheduleSetup(t, 600, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 1h, zone: UTC, start: %s}", schedT0.Format(time.RFC3339)), "throttle: {records_per_second: 100}")
	at, report := schedT0.Add(3*time.Hour).Format(time.RFC3339), filepath.Join(dir, "r.json")
	var stdout, stderr testenv.Buffer
	a := newApp(&stdout, &stderr)
	root := a.root()
	root.SetArgs([]string{"run", planFile, "--yes", "--at", at, "--max-intervals", "3", "--report", report})
	root.SetIn(strings.NewReader(""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() { exit <- a.exitCode(root.ExecuteContext(ctx)) }()
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(stderr.String(), "run started") },
		func() string { return "no interval started:\n" + stderr.String() })
	cancel()
	code := <-exit
	want := "resume with: replay run " + planFile + " --yes --at " + at + " --max-intervals 3 --report " + report
	if out := stdout.String() + stderr.String(); code != exitFailed || strings.Count(out, "resume with:") != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want %d with one %q:\n%s", code, exitFailed, want, out)
	}
}

// Flags that mean nothing together with a schedule are refused (exit 2),
// not ignored: --interval with --max-intervals, and replay plan --shards.
func TestScheduleFlagConflicts(t *testing.T) {
	_, _, planFile, _ := scheduleSetup(t, 30, schedT0, schedT0.Add(time.Hour),
		fmt.Sprintf("{every: 1h, zone: UTC, start: %s}", schedT0.Format(time.RFC3339)))
	at := schedT0.Add(2 * time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", planFile, "--yes", "--at", at, "--interval", schedT0.Format(time.RFC3339), "--max-intervals", "2"}, "--interval re-runs one interval and --max-intervals bounds a catch-up"},
		{[]string{"plan", planFile, "--at", at, "--shards", "2"}, "--out, --resolution and --shards"},
	} {
		if r := replay(t, tc.args...); r.code != exitInvalid || !strings.Contains(r.text(), tc.want) {
			t.Errorf("%v: want exit 2 saying %q, got %s", tc.args, tc.want, r)
		}
	}
}
