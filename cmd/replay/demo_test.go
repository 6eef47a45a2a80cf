package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs `replay demo` on a small seed in a scratch directory: it must
// exit 0 and print its own check's verdict.
func TestDemo(t *testing.T) {
	t.Setenv("REPLAY_DEMO_BROKERS", "") // demo sets it; restored after the test
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "demo.jsonl")
	demo := string(readFile(t, "../../plans/demo.yaml"))
	demo = regexp.MustCompile(`(?m)^(\s*path:\s*)\S+`).ReplaceAllString(demo, "${1}"+out)
	planFile := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(planFile, []byte(demo), 0o644); err != nil {
		t.Fatal(err)
	}

	r := replay(t, "demo", "--records", "20000", "--plan", planFile)
	if r.code != exitOK {
		t.Fatalf("want exit 0, got %s", r)
	}
	if !regexp.MustCompile(`(?m)^check passed: the output holds exactly the [1-9]\d* seeded records stamped in \[`).MatchString(r.stdout) {
		t.Errorf("no check passed line:\n%s", r)
	}
	if !strings.Contains(r.stdout, "output: "+out) {
		t.Errorf("the output path is not %s:\n%s", out, r)
	}
	n := strings.Count(string(readFile(t, out)), "\n")
	if n == 0 || !strings.Contains(r.stdout, "the "+strconv.Itoa(n)+" seeded records") {
		t.Errorf("the output has %d records, the check says otherwise:\n%s", n, r)
	}
	if _, err := os.Stat(out + ".parts"); !os.IsNotExist(err) {
		t.Errorf("staging directory left behind: %v", err)
	}
}

// Outside a checkout the demo runs the plan embedded in the binary, from a
// temporary directory it removes when it is done.
func TestDemoOutsideACheckout(t *testing.T) {
	t.Setenv("REPLAY_DEMO_BROKERS", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir() // no plans/demo.yaml here
	r := replayProcess(t, dir, "demo", "--records", "20000")
	if r.code != exitOK || !strings.Contains(r.stdout, "check passed") {
		t.Fatalf("want exit 0 and the check's verdict, got %s", r)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "replay-demo-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("the demo left %v in TMPDIR (%v)", left, err)
	}
}
