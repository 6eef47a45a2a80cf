package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkJSONLines fails unless every line of a non-terminal stderr is a JSON
// object with a level and a message, as log shippers expect.
func checkJSONLines(t *testing.T, what, s string) {
	t.Helper()
	if s == "" {
		t.Errorf("%s: empty", what)
		return
	}
	if !strings.HasSuffix(s, "\n") {
		t.Errorf("%s: the last line is not terminated: %q", what, s)
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("%s: line is not a JSON object: %q", what, l)
			continue
		}
		if m["level"] == nil || m["message"] == nil || m["time"] == nil {
			t.Errorf("%s: log line without level, message or time: %s", what, l)
		}
	}
}

// checkNoLogs fails when a log line leaked into stdout.
func checkNoLogs(t *testing.T, what, s string) {
	t.Helper()
	for _, l := range lines(s) {
		if strings.HasPrefix(strings.TrimSpace(l), "{") || strings.Contains(l, `"level"`) {
			t.Errorf("%s: log line on stdout: %q", what, l)
		}
	}
}

// TestLogs: when stderr is not a terminal (a buffer here, a pipe under a
// scheduler) every stderr line is a zerolog JSON object, and stdout carries
// only the tables and the summary.
func TestLogs(t *testing.T) {
	sb, seed := newCluster(t, 3, 6000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	from, to := seed.From.Add(time.Hour), seed.From.Add(3*time.Hour)
	file := writePlan(t, dir, planSpec{name: "logs", addr: sb.Addr, from: from, to: to, sink: fileSink(out, 100)})

	t.Run("completed run", func(t *testing.T) {
		r := replay(t, "--log-level", "debug", "run", "--yes", file)
		if r.code != exitOK {
			t.Fatalf("run: %s", r)
		}
		checkJSONLines(t, "stderr", r.stderr)
		checkNoLogs(t, "stdout", r.stdout)
		for _, want := range []string{`"message":"run started"`, `"partition":2`, `"message":"partition done"`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %s:\n%s", want, r.stderr)
			}
		}
		for _, want := range []string{"PARTITION", "TOTAL", "records written to " + out} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("nothing to do", func(t *testing.T) {
		r := replay(t, "run", "--yes", file)
		if r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
			t.Fatalf("run: %s", r)
		}
		checkNoLogs(t, "stdout", r.stdout)
		if r.stderr != "" {
			checkJSONLines(t, "stderr", r.stderr)
		}
	})
	t.Run("failed run", func(t *testing.T) {
		bad := writePlan(t, dir, planSpec{name: "logs-missing-topic", addr: sb.Addr, topic: "nope", from: from, to: to, sink: fileSink(out+"2", 100)})
		r := replay(t, "run", "--yes", bad)
		if r.code != exitFailed {
			t.Fatalf("run: %s", r)
		}
		checkJSONLines(t, "stderr", r.stderr)
		if !strings.Contains(r.text(), "nope does not exist") {
			t.Errorf("stderr does not say what failed:\n%s", r.stderr)
		}
	})
}
