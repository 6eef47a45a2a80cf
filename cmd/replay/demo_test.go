package main

import (
	"encoding/json"
	"fmt"
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

// TestDemoOtherSinks: with a sink whose output is not one JSON lines file
// (a directory of Parquet objects, a CSV file), the demo checks what the
// run reports against the seed, and the output holds what it says.
func TestDemoOtherSinks(t *testing.T) {
	t.Setenv("REPLAY_DEMO_BROKERS", "")
	demo := string(readFile(t, "../../plans/demo.yaml"))
	cut := strings.Index(demo, "sink:")
	for _, tc := range []struct {
		name, sink string
		rows       func(t *testing.T, out string) int
	}{
		{"parquet", "sink:\n  type: parquet\n  path: %s\n", func(t *testing.T, out string) int {
			var m struct{ Rows int }
			if err := json.Unmarshal(readFile(t, filepath.Join(out, "_manifest.json")), &m); err != nil {
				t.Fatal(err)
			}
			return m.Rows
		}},
		{"csv", "sink:\n  type: file\n  path: %s\n  format: csv\n  columns: {partition: partition, offset: offset}\n", func(t *testing.T, out string) int {
			return strings.Count(string(readFile(t, out)), "\n") - 1 // the header
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out", "demo")
			planFile := filepath.Join(dir, "demo.yaml")
			if err := os.WriteFile(planFile, []byte(demo[:cut]+fmt.Sprintf(tc.sink, out)), 0o644); err != nil {
				t.Fatal(err)
			}
			r := replay(t, "demo", "--records", "20000", "--plan", planFile)
			if r.code != exitOK {
				t.Fatalf("want exit 0, got %s", r)
			}
			m := regexp.MustCompile(`(?m)^check passed: the run read exactly the ([1-9]\d*) seeded records stamped in \[.*; the sink wrote (\d+), 0 were skipped$`).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no check passed line:\n%s", r)
			}
			if m[1] != m[2] {
				t.Errorf("read %s, wrote %s:\n%s", m[1], m[2], r)
			}
			if !strings.Contains(r.stdout, "output: "+out+" ("+tc.name) && !strings.Contains(r.stdout, "output: "+out+" (file") {
				t.Errorf("the output is not named %s:\n%s", out, r)
			}
			if n := tc.rows(t, out); strconv.Itoa(n) != m[1] {
				t.Errorf("the output holds %d records, the check says %s", n, m[1])
			}
		})
	}
}
