package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
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
func scheduleSetup(t *testing.T, n int, from, to time.Time, window string) (sb *testenv.Kafka, dir, planFile, db string) {
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
`, sb.Addr, window, db)
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
	NextDue time.Time `json:"next_due"`
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
