package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestExitCodes checks the exit codes README.md documents (Commands and exit codes) and which stream
// carries what: 0 done, 1 run failed, 2 invalid plan or usage, 3 refused.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	valid := writePlan(t, dir, planSpec{name: "valid", addr: "127.0.0.1:9092",
		from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: fileSink(filepath.Join(dir, "out.jsonl"), 100)})
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte(invalidPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	location := regexp.MustCompile(`^` + regexp.QuoteMeta(invalid) + `:\d+:\d+: `)

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string // substrings
		stdoutLine *regexp.Regexp
	}{
		{name: "validate valid plan", args: []string{"validate", valid}, code: exitOK, stdout: []string{"1 plan(s) valid"}},
		{name: "validate invalid plan", args: []string{"validate", invalid}, code: exitInvalid,
			stdout: []string{invalid + `:8:3: throttle.records_per_seconds: unknown field "records_per_seconds" in throttle (did you mean "records_per_second"?)`,
				invalid + `:10:9: window.from: time "2026-11-03T10:00:00" has no zone`, "problem(s) in 1 plan(s)"},
			stdoutLine: location},
		{name: "validate valid and invalid", args: []string{"validate", valid, invalid}, code: exitInvalid, stdout: []string{"in 2 plan(s)"}},
		{name: "validate missing file", args: []string{"validate", filepath.Join(dir, "nope.yaml")}, code: exitInvalid, stdout: []string{"nope.yaml: read plan:"}},
		// A mistyped plan path is a usage mistake (2), as for validate, not a
		// failed run (1) that a scheduler would retry.
		{name: "run missing plan file", args: []string{"run", "--yes", filepath.Join(dir, "nope.yaml")}, code: exitInvalid, stderr: []string{"nope.yaml"}},
		{name: "plan missing plan file", args: []string{"plan", filepath.Join(dir, "nope.yaml")}, code: exitInvalid, stderr: []string{"nope.yaml"}},
		{name: "demo missing plan file", args: []string{"demo", "--records", "10", "--plan", filepath.Join(dir, "nope.yaml")}, code: exitInvalid, stderr: []string{"nope.yaml"}},
		{name: "run invalid plan", args: []string{"run", "--yes", invalid}, code: exitInvalid, stderr: []string{"invalid plan:", invalid + ":8:3:"}},
		{name: "unknown command", args: []string{"replai"}, code: exitInvalid, stderr: []string{`unknown command "replai"`}},
		{name: "unknown flag", args: []string{"run", "--restrat", valid}, code: exitInvalid, stderr: []string{"unknown flag: --restrat"}},
		{name: "bad flag value", args: []string{"demo", "--records", "many"}, code: exitInvalid, stderr: []string{`invalid argument "many"`}},
		{name: "bad log level", args: []string{"--log-level", "loud", "validate", valid}, code: exitInvalid, stderr: []string{"--log-level"}},
		{name: "run without plan", args: []string{"run"}, code: exitInvalid, stderr: []string{"accepts 1 arg(s), received 0"}},
		{name: "run two plans", args: []string{"run", valid, valid}, code: exitInvalid, stderr: []string{"accepts 1 arg(s), received 2"}},
		{name: "validate without plan", args: []string{"validate"}, code: exitInvalid, stderr: []string{"requires at least 1 arg(s)"}},
		{name: "plan without plan", args: []string{"plan"}, code: exitInvalid},
		{name: "demo with records 0", args: []string{"demo", "--records", "0"}, code: exitInvalid, stderr: []string{"--records"}},
		{name: "demo with too many partitions", args: []string{"demo", "--records", "10", "--partitions", "100000"}, code: exitInvalid,
			stderr: []string{"--partitions 100000: the demo takes 1 to 1000"}},
		{name: "help", args: []string{"--help"}, code: exitOK, stdout: []string{"Usage:", "validate", "run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := replay(t, tt.args...)
			if r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.text(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, r)
				}
			}
			if tt.stdoutLine != nil {
				ls := lines(r.stdout)
				for _, l := range ls[:len(ls)-1] { // the last line is the count
					if !tt.stdoutLine.MatchString(l) {
						t.Errorf("stdout line %q is not file:line:col: ...", l)
					}
				}
			}
		})
	}
}

// invalidPlan has several problems, each reported with its position.
const invalidPlan = `version: 1
name: orders fix
source:
  brokers: ["kafka-1:9092"]
  topic: orders
group: replay.orders-fix
throttle:
  records_per_seconds: 100
window:
  from: 2026-11-03T10:00:00
sink: {type: file, path: out.jsonl}
`

// TestRunRefusesForeignGroup: a group with a commit that replay did not make
// belongs to a real consumer; replaying with it would move that consumer's
// position, so run refuses (exit 3) and commits nothing.
func TestRunRefusesForeignGroup(t *testing.T) {
	sb, seed := newCluster(t, 3, 3000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "foreign", addr: sb.Addr, group: "billing-service",
		from: seed.From.Add(time.Hour), to: seed.From.Add(2 * time.Hour), sink: fileSink(out, 100)})

	client := &kafka.Client{Addr: kafka.TCP(sb.Addr), Timeout: 10 * time.Second}
	resp, err := client.OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{
		GroupID: "billing-service", GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"orders": {{Partition: 1, Offset: 42}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics["orders"] {
		if p.Error != nil {
			t.Fatal(p.Error)
		}
	}

	for _, args := range [][]string{{"run", "--yes", file}, {"plan", file}} {
		cmd := args[0]
		r := replay(t, args...)
		if r.code != exitRefused {
			t.Fatalf("%s: want exit %d, got %s", cmd, exitRefused, r)
		}
		if !strings.Contains(r.text(), `refusing group "billing-service"`) || !strings.Contains(r.text(), "replay did not make") {
			t.Errorf("%s: stderr does not say why:\n%s", cmd, r)
		}
	}
	cps := checkpoints(t, file, 3)
	if cps[0].Offset != -1 || cps[2].Offset != -1 || cps[1].Offset != 42 || cps[1].Replay {
		t.Errorf("the group's commits changed: %+v", cps)
	}
}

// TestRunUnreachableBroker: a broker nobody listens on fails the run (exit 1)
// quickly, naming the address.
func TestRunUnreachableBroker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "unreachable", addr: addr,
		from: time.Now().Add(-3 * time.Hour), to: time.Now().Add(-time.Hour), sink: fileSink(filepath.Join(dir, "out.jsonl"), 100)})
	start := time.Now()
	r := replay(t, "run", "--yes", file)
	if r.code != exitFailed {
		t.Fatalf("want exit %d, got %s", exitFailed, r)
	}
	if !strings.Contains(r.text(), "connect to "+addr) || !strings.Contains(r.text(), "reachable") {
		t.Errorf("stderr does not say which broker is unreachable:\n%s", r)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %s to fail", el)
	}
}

// TestRunMissingTopic: a topic that does not exist fails the run (exit 1)
// with a message that says so, and commits nothing.
func TestRunMissingTopic(t *testing.T) {
	sb, seed := newCluster(t, 1, 0)
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "missing-topic", addr: sb.Addr, topic: "ordres",
		from: seed.From, to: seed.To, sink: fileSink(filepath.Join(dir, "out.jsonl"), 100)})
	r := replay(t, "run", "--yes", file)
	if r.code != exitFailed {
		t.Fatalf("want exit %d, got %s", exitFailed, r)
	}
	if !strings.Contains(r.text(), "ordres does not exist") || !strings.Contains(r.text(), "did you mean orders?") {
		t.Errorf("stderr does not name the missing topic and the one meant:\n%s", r)
	}
}
