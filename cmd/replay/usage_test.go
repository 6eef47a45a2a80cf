package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replay-tool/replay/runner"
)

// Regression: --format xml and -o yaml were reported by the command, after
// logging was set up, so off a terminal they came as a JSON log line while
// every other flag mistake is a plain "error: ..." line. They are flag
// errors now, reported as cobra reports any (exit 2, in plain text).
func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	valid := writePlan(t, t.TempDir(), planSpec{name: "flags", addr: "127.0.0.1:9092",
		from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: "{type: stdout}"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "--format", "xml", valid}, `error: invalid argument "xml" for "--format" flag: want text, json or github`},
		{[]string{"status", "-o", "yaml", valid}, `error: invalid argument "yaml" for "-o, --output" flag: want table or json`},
		{[]string{"plan", "--output=yaml", valid}, `error: invalid argument "yaml" for "-o, --output" flag: want table or json`},
		{[]string{"run", "--bogus", valid}, "error: unknown flag: --bogus"}, // the reference
		// Regression: an invalid port exited 1 (a failed run) after trying to listen.
		{[]string{"sandbox", "--port", "99999"}, `error: invalid argument "99999" for "--port" flag: want a port number 0..65535`},
		{[]string{"sandbox", "--port", "-1"}, `error: invalid argument "-1" for "--port" flag`},
		// A window resolved against a future --at would be empty and recorded as replayed.
		{[]string{"run", "--yes", "--at", "2999-01-01T00:00:00Z", valid}, `error: invalid argument "2999-01-01T00:00:00Z" for "--at" flag: 2999-01-01T00:00:00Z is in the future`},
		{[]string{"plan", "--at", "1000-01-01T00:00:00Z", valid}, `error: invalid argument "1000-01-01T00:00:00Z" for "--at" flag: 1000-01-01T00:00:00Z is before 1970`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := replay(t, tc.args...)
			if r.code != exitInvalid || !strings.HasPrefix(r.stderr, tc.want) || !strings.Contains(r.stderr, "Run 'replay --help' for usage.") {
				t.Fatalf("want exit %d and a plain %q, got %s", exitInvalid, tc.want, r)
			}
		})
	}
	// --detailed-exitcode turns usage mistakes into exit 1, flag values too.
	if r := replay(t, "plan", "--detailed-exitcode", "-o", "xml", valid); r.code != exitFailed {
		t.Errorf("--detailed-exitcode -o xml: want exit %d, got %s", exitFailed, r)
	}
}

// Regression: a port in use said only "address already in use".
func TestSandboxPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	r := replay(t, "sandbox", "--port", port)
	if r.code != exitFailed || !strings.Contains(r.text(), "address already in use") || !strings.Contains(r.text(), "pick another with --port") {
		t.Fatalf("port %s in use: %s", port, r)
	}
}

// Regression: --report naming a directory (or a path that cannot be
// written) failed only after the whole run. It is checked before replay
// connects: exit 2, naming --report.
func TestRunReportCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	// Nothing listens on the broker address: a run that got as far as
	// connecting would fail on that (exit 1), not on --report.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	file := writePlan(t, dir, planSpec{name: "report", addr: addr,
		from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: fileSink(filepath.Join(dir, "out.jsonl"), 100)})
	for _, tc := range []struct{ report, want string }{
		{dir, "--report: " + dir + " is a directory: name a file, e.g. " + filepath.Join(dir, "report.json")},
	} {
		r := replay(t, "run", "--yes", "--report", tc.report, file)
		if r.code != exitInvalid || !strings.Contains(r.text(), tc.want) || strings.Contains(r.text(), "connect") {
			t.Errorf("--report %s: want exit %d with %q before connecting, got %s", tc.report, exitInvalid, tc.want, r)
		}
	}
	// A report file that can be written passes the check; the run then
	// fails to connect, and the report says so (replacing an older one).
	report := filepath.Join(dir, "report.json")
	if err := os.WriteFile(report, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := replay(t, "run", "--yes", "--report", report, file); r.code != exitFailed || !strings.Contains(r.text(), "connect to") {
		t.Fatalf("writable --report: want the connection error, got %s", r)
	}
	if b, _ := os.ReadFile(report); !strings.Contains(string(b), `"error": "connect to`) {
		t.Errorf("the report of the failed run lacks its error: %q", b)
	}
	// A report that cannot be created: under a regular file (ENOTDIR,
	// whatever the user; a read-only directory does not stop root).
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := replay(t, "run", "--yes", "--report", filepath.Join(blocker, "sub", "r.json"), file); r.code != exitInvalid || !strings.Contains(r.text(), "--report: create the directory of "+filepath.Join(blocker, "sub", "r.json")) ||
		!strings.Contains(r.text(), "not a directory") {
		t.Errorf("--report under a regular file: want exit %d naming it, got %s", exitInvalid, r)
	}
}

// Regression: a broker address that is not Kafka (PostgreSQL's port, say)
// waited, then said "context deadline exceeded"; kafka-go took the first
// bytes of the answer for a response size and array lengths and allocated
// gigabytes (1.8 GB RSS against PostgreSQL's port) until the timeout.
func TestConnectToSomethingElse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer []byte // nil: never answers, waits for its own protocol
		want   string // %s is the address
	}{
		{"silent", nil, "no Kafka answer from %s within 2s: is it a Kafka broker port (not, e.g., PostgreSQL or Redis)?"},
		{"answers in its own protocol and hangs up", []byte("-ERR unknown command\r\n"),
			`%s is not a Kafka broker: it answered "-ERR unk", which is not a Kafka response`},
		{"PostgreSQL", []byte("E\x00\x00\x00\x84SFATAL\x00"), `%s is not a Kafka broker: it answered "E\x00\x00\x00\x84SFA"`},
		{"HTTP", []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), `%s is not a Kafka broker: it answered "HTTP/1.1"`},
		{"short answer", []byte("no"), `%s is not a Kafka broker: it answered "no"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						c.Read(make([]byte, 512))
						if tc.answer == nil {
							// A slow peer, not a timing guess: it stays silent past the probe timeout.
							select {
							case <-time.After(5 * time.Second):
							case <-t.Context().Done():
							}
							return
						}
						c.Write(tc.answer)
					}()
				}
			}()
			file := writePlan(t, t.TempDir(), planSpec{name: "not-kafka", addr: l.Addr().String(),
				from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: "{type: stdout}"})
			r := replayWith(t, func(a *app) { a.probeTimeout = 2 * time.Second }, "plan", file)
			want := fmt.Sprintf(tc.want, l.Addr().String())
			if r.code != exitFailed || !strings.Contains(r.text(), want) {
				t.Fatalf("want %q, got %s", want, r)
			}
		})
	}
}

// The message of each signal, before and during a run.
func TestSignalMessage(t *testing.T) {
	a := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	if got := a.signalMessage(os.Interrupt); got != "interrupt: cancelled" {
		t.Errorf("before a run: %q", got)
	}
	if got := a.signalMessage(nil); got != "" {
		t.Errorf("second signal before a run: %q", got)
	}
	a.running.Store(true)
	if got := a.signalMessage(syscall.SIGTERM); !strings.Contains(got, "terminated: finishing the in-flight batch and committing") {
		t.Errorf("during a run: %q", got)
	}
	if got := a.signalMessage(nil); !strings.HasPrefix(got, "quitting at once") {
		t.Errorf("second signal during a run: %q", got)
	}
}

// Regression: status showed 100.0% DONE for a group replay refuses (only
// foreign commits: 100% of no replay commit).
func TestStatusRefusedGroupShowsNoPercentage(t *testing.T) {
	foreign := &runner.Progress{Plan: "p", Topic: "orders", Group: "orders-service", State: runner.StateForeign, PercentDone: 100,
		Partitions: []runner.PartitionProgress{{Partition: 0, Committed: 42, Start: -1, End: -1, Remaining: -1, HighWatermark: 50}}}
	var b bytes.Buffer
	printProgress(&b, foreign, "p.yaml")
	total := totalLine(b.String())
	if strings.Contains(b.String(), "100.0%") || !strings.Contains(total, "refused: foreign") {
		t.Errorf("foreign group:\n%s", b.String())
	}
	other := &runner.Progress{Plan: "p", Topic: "orders", Group: "replay.p", State: runner.StateOtherPlan, OtherPlan: "q",
		Records: 10, Remaining: 0, Replayed: 10, PercentDone: 100,
		Partitions: []runner.PartitionProgress{{Partition: 0, Committed: 10, Start: 0, End: 10, Remaining: 0, Replay: true, Plan: "q", PercentDone: 100, Done: true}}}
	b.Reset()
	printProgress(&b, other, "p.yaml")
	if total := totalLine(b.String()); strings.Contains(total, "%") || !strings.Contains(total, "refused: other plan") {
		t.Errorf("group of another plan:\n%s", b.String())
	}
}

func totalLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "TOTAL") {
			return l
		}
	}
	return ""
}

// Found by a break-it pass: --report wrote nothing when the run failed
// before reading (an unreachable broker, a refusal), leaving a scheduler
// without a report. It now holds the error and the exit code (1).
func TestReportWrittenOnEarlyFailure(t *testing.T) {
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "unreachable", addr: "127.0.0.1:1",
		from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: "{type: stdout}"})
	report := filepath.Join(dir, "report.json")
	r := replay(t, "run", "--yes", "--report", report, file)
	if r.code != exitFailed {
		t.Fatalf("want exit %d, got %s", exitFailed, r)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report after an early failure: %v", err)
	}
	var rep struct {
		PlanFile  string `json:"plan_file"`
		Error     string `json:"error"`
		Published bool   `json:"published"`
		ExitCode  *int   `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.PlanFile != file || !strings.Contains(rep.Error, "not reachable") || rep.Published || rep.ExitCode == nil || *rep.ExitCode != exitFailed {
		t.Errorf("report %s: want the plan file, the error, published false and exit_code %d", b, exitFailed)
	}
}
