package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/replay-tool/replay/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/* from the current output")

// checkGolden compares got with testdata/golden/name (rewritten with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (go test ./cmd/replay -run %s -update creates it): %v", t.Name(), err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test ./cmd/replay -run '%s' -update to accept):\n--- got:\n%s--- want:\n%s", t.Name(), path, t.Name(), got, want)
	}
}

// TestValidateFormats: the three output formats of validate over a clean
// plan, two with warnings, an invalid one and a missing file.
func TestValidateFormats(t *testing.T) {
	files := []string{"testdata/validate/clean.yaml", "testdata/validate/warnings.yaml", "testdata/validate/slow-batches.yaml",
		"testdata/validate/invalid.yaml", "testdata/validate/empty-window.yaml", "testdata/validate/missing.yaml"}
	for _, format := range []string{"text", "json", "github"} {
		t.Run(format, func(t *testing.T) {
			r := replay(t, append([]string{"validate", "--format", format}, files...)...)
			if r.code != exitInvalid || r.stderr != "" {
				t.Fatalf("want exit %d and nothing on stderr, got %s", exitInvalid, r)
			}
			if format == "json" && !json.Valid([]byte(r.stdout)) {
				t.Fatalf("not JSON:\n%s", r.stdout)
			}
			checkGolden(t, "validate."+format, mask(r.stdout))
		})
	}
	// Warnings alone do not fail, in any format.
	for _, format := range []string{"text", "json", "github"} {
		r := replay(t, "validate", "--format", format, "testdata/validate/clean.yaml", "testdata/validate/warnings.yaml")
		if r.code != exitOK {
			t.Errorf("%s: plans with warnings only: want exit 0, got %s", format, r)
		}
	}
	if r := replay(t, "validate", "--format", "xml", files[0]); r.code != exitInvalid || !strings.Contains(r.stderr, "--format") {
		t.Errorf("--format xml: %s", r)
	}
}

// Workflow command values are escaped as GitHub's toolkit does: a file
// name with "," or ":" must not end the property, a newline not the message.
func TestGitHubEscaping(t *testing.T) {
	if got := ghProperty("plans/a,b:c%.yaml"); got != "plans/a%2Cb%3Ac%25.yaml" {
		t.Errorf("ghProperty = %q", got)
	}
	if got := ghData("a: b,c\nd%"); got != "a: b,c%0Ad%25" {
		t.Errorf("ghData = %q", got)
	}
}

// goldenT0 is where the golden data starts: fixed, so outputs never
// change, and in the past, so windows are complete (kfake applies no
// retention unless a topic configures it).
var goldenT0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// toPartition sends every message to one partition.
type toPartition int

func (p toPartition) Balance(kafka.Message, ...int) int { return int(p) }

// produceGolden writes records first..first+n-1 to one partition: record i
// has key k-i, a value whose size varies with i, and timestamp goldenT0 +
// i minutes.
func produceGolden(t *testing.T, addr string, part int32, first, n int) {
	t.Helper()
	// A transport of its own: the default one's metadata cache outlives a
	// topic deleted and created again (on a real cluster, between tests).
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "orders", Balancer: toPartition(part), RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: time.Millisecond, Transport: tr}
	defer w.Close()
	msgs := make([]kafka.Message, 0, n)
	for i := first; i < first+n; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k-%d", i)), Value: []byte(fmt.Sprintf(`{"id":%d,"note":%q}`, i, strings.Repeat("x", i%7))),
			Time: goldenT0.Add(time.Duration(i) * time.Minute)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// goldenPlan writes a plan for the golden cluster. Its fingerprint must not
// change between runs: the broker address is not part of it, and the sink
// path is fixed (plan never writes it).
func goldenPlan(t *testing.T, addr, name, window, extra string) string {
	t.Helper()
	body := fmt.Sprintf("version: 1\nname: %s\nsource: {brokers: [%q], topic: orders}\ngroup: replay.%s\nwindow:\n%s\nsink: {type: file, path: out/%s.jsonl, batch_size: 50}\n%s",
		name, addr, name, window, name, extra)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func minutes(m int) string { return goldenT0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }

var (
	resolvedAt  = regexp.MustCompile(`(resolved at |"resolved_at": ")[0-9TZ:.+-]+`)
	fingerprint = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
)

// mask replaces the wall-clock time of the resolution, and fingerprints:
// how a plan is fingerprinted is tested in package plan, and these goldens
// must not change with it.
func mask(s string) string {
	s = resolvedAt.ReplaceAllString(s, "${1}<resolved-at>")
	return fingerprint.ReplaceAllString(s, "<fingerprint>")
}

// TestPlanOutcomes: `replay plan` for every partition outcome docs/semantics.md lists, as a
// table and as JSON, against seeded data with fixed timestamps.
func TestPlanOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		partitions int32
		setup      func(t *testing.T, sb *testenv.Kafka)
		window     string
		extra      string
		work       bool
	}{
		// Partition 0 is sampled at both ends (bytes estimated), partition
		// 1 is small enough to be read whole (bytes exact); the ETA is the
		// slower of the two limits.
		{name: "in-range", partitions: 2, work: true,
			setup: func(t *testing.T, sb *testenv.Kafka) {
				produceGolden(t, sb.Addr, 0, 0, 500)
				produceGolden(t, sb.Addr, 1, 0, 50)
			},
			window: fmt.Sprintf("  from: %s\n  to: %s", minutes(10), minutes(400)),
			extra:  "throttle: {records_per_second: 50, bytes_per_second: 2KiB}\n"},
		{name: "empty-partition", partitions: 1,
			setup:  func(t *testing.T, sb *testenv.Kafka) {},
			window: fmt.Sprintf("  from: %s\n  to: %s", minutes(0), minutes(60))},
		{name: "window-after-last-record", partitions: 1,
			setup:  func(t *testing.T, sb *testenv.Kafka) { produceGolden(t, sb.Addr, 0, 0, 50) },
			window: fmt.Sprintf("  from: %s\n  to: %s", minutes(120), minutes(180))},
		{name: "window-before-first-record", partitions: 1,
			setup:  func(t *testing.T, sb *testenv.Kafka) { produceGolden(t, sb.Addr, 0, 0, 50) },
			window: fmt.Sprintf("  from: %s\n  to: %s", minutes(-120), minutes(-60))},
		// Retention deleted offsets 0..19; the plan accepts the loss.
		{name: "start-before-retention", partitions: 1, work: true,
			setup:  retentionSetup,
			window: fmt.Sprintf("  from: %s\n  to: %s", minutes(-60), minutes(50)),
			extra:  "allow_data_loss: true\nthrottle: {records_per_second: 10}\n"},
		{name: "start-before-retention-offsets", partitions: 1, work: true,
			setup:  retentionSetup,
			window: "  offsets: {0: {from: 5, to: 60}}",
			extra:  "allow_data_loss: true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := testenv.NewKafka(t, testenv.Partitions(tt.partitions), testenv.Topics("orders"))
			tt.setup(t, sb)
			file := goldenPlan(t, sb.Addr, tt.name, tt.window, tt.extra)
			r := replay(t, "plan", file)
			if r.code != exitOK {
				t.Fatalf("plan: %s", r)
			}
			checkGolden(t, "plan-"+tt.name+".txt", mask(r.stdout))
			r = replay(t, "plan", "--output", "json", file)
			if r.code != exitOK || !json.Valid([]byte(r.stdout)) {
				t.Fatalf("plan --output json: %s", r)
			}
			checkGolden(t, "plan-"+tt.name+".json", mask(r.stdout))
			want := exitOK
			if tt.work {
				want = exitInvalid
			}
			if r := replay(t, "plan", "--detailed-exitcode", file); r.code != want {
				t.Errorf("--detailed-exitcode: want exit %d, got %s", want, r)
			}
		})
	}
}

func retentionSetup(t *testing.T, sb *testenv.Kafka) {
	produceGolden(t, sb.Addr, 0, 0, 100)
	if err := sb.DeleteRecords("orders", 0, 20); err != nil {
		t.Fatal(err)
	}
}

// TestPlanRetentionCutShowsTable: `replay plan` on a window retention
// already cut, without allow_data_loss, prints the table with its
// start-before-retention rows (text and JSON), then the error, and exits 1;
// `replay run` refuses the same way, before touching the sink.
func TestPlanRetentionCutShowsTable(t *testing.T) {
	for _, tt := range []struct{ name, window string }{
		{"time", fmt.Sprintf("  from: %s\n  to: %s", minutes(-60), minutes(50))},
		{"offsets", "  offsets: {0: {from: 5, to: 60}}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := testenv.NewKafka(t, testenv.Topics("orders"))
			retentionSetup(t, sb)
			file := goldenPlan(t, sb.Addr, "retention-cut-"+tt.name, tt.window, "")
			r := replay(t, "plan", file)
			if r.code != exitFailed || !strings.Contains(r.stderr, "the window starts before the log start offset") {
				t.Fatalf("plan: want exit 1 with the retention error: %s", r)
			}
			checkGolden(t, "plan-retention-cut-"+tt.name+".txt", mask(r.stdout))
			r = replay(t, "plan", "-o", "json", file)
			if r.code != exitFailed || !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stdout, `"outcome": "start-before-retention"`) {
				t.Fatalf("plan -o json: want exit 1 and the JSON table: %s", r)
			}
			if r := replay(t, "run", "--yes", file); r.code != exitFailed || !strings.Contains(r.stdout+r.stderr, "start-before-retention") {
				t.Fatalf("run: want exit 1 showing the start-before-retention row: %s", r)
			}
		})
	}
}
