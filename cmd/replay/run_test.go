package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestRunReport: --report writes the JSON report on every run that gets to
// the sink, including one with nothing left to do (a scheduler reads it after
// each run; it was not written then, leaving a missing or stale file).
func TestRunReport(t *testing.T) {
	sb, seed := newCluster(t, 3, 6000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "report", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(5 * time.Hour), sink: fileSink(out, 100)})

	// The report's directory does not exist yet: the run creates it.
	first, second := filepath.Join(dir, "reports", "2026-11", "first.json"), filepath.Join(dir, "second.json")
	if r := replay(t, "run", "--yes", "--report", first, file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	written := int64(strings.Count(string(readFile(t, out)), "\n"))
	rep := gjson.ParseBytes(readFile(t, first))
	if got := rep.Get("partitions.#.written").Array(); len(got) != 3 || rep.Get("nothing_to_do").Bool() ||
		got[0].Int()+got[1].Int()+got[2].Int() != written || written == 0 || !rep.Get("exit_code").Exists() || rep.Get("exit_code").Int() != exitOK {
		t.Errorf("first report does not match the %d records written: %s", written, rep.Raw)
	}

	r := replay(t, "run", "--yes", "--report", second, file)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("second run: %s", r)
	}
	b, err := os.ReadFile(second)
	if err != nil {
		t.Fatalf("no report for a run with nothing to do: %v", err)
	}
	var rep2 struct {
		NothingToDo bool `json:"nothing_to_do"`
		ExitCode    *int `json:"exit_code"`
		Partitions  []struct {
			Written int64 `json:"written"`
			Done    bool  `json:"done"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &rep2); err != nil {
		t.Fatal(err)
	}
	if !rep2.NothingToDo || len(rep2.Partitions) != 3 || rep2.ExitCode == nil || *rep2.ExitCode != exitOK {
		t.Errorf("second report: %s", b)
	}
	for _, p := range rep2.Partitions {
		if p.Written != 0 || !p.Done {
			t.Errorf("second report: %s", b)
		}
	}
}

// TestReportOfARefusedRunInANewDirectory: a run refused before it
// connects (no --yes without a terminal) writes its report too, creating
// the report's directory as a run that gets further does.
func TestReportOfARefusedRunInANewDirectory(t *testing.T) {
	sb, seed := newCluster(t, 1, 10)
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "refused", addr: sb.Addr, from: seed.From, to: seed.To, sink: "{type: stdout}"})
	report := filepath.Join(dir, "new", "deeper", "report.json")
	r := replay(t, "run", file, "--report", report)
	if r.code != exitInvalid {
		t.Fatalf("run without --yes: want exit %d, got %s", exitInvalid, r)
	}
	b, err := os.ReadFile(report)
	if err != nil || !gjson.ValidBytes(b) || !strings.Contains(gjson.GetBytes(b, "error").String(), "add --yes") {
		t.Fatalf("report of the refused run: %v: %s", err, b)
	}
}

// TestStdoutSinkValueFormat: `replay run` writes the stdout sink's values
// in the plan's value_format (base64 here): the value of every line
// decodes to the record's bytes as kcat reads them.
func TestStdoutSinkValueFormat(t *testing.T) {
	sb, seed := newCluster(t, 1, 50)
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "preview64", addr: sb.Addr, from: seed.From, to: seed.To, sink: "{type: stdout, value_format: base64}"})
	r := replay(t, "run", "--yes", file)
	if r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	kc := testenv.KcatRecords(t, sb.Addr, "orders", 0)
	got := lines(r.stdout)
	if len(got) != len(kc) || len(got) == 0 {
		t.Fatalf("stdout holds %d records, kcat reads %d", len(got), len(kc))
	}
	for i, l := range got {
		v, err := base64.StdEncoding.DecodeString(gjson.Get(l, "value").String())
		if gjson.Get(l, "value_encoding").String() != "base64" || err != nil || !bytes.Equal(v, kc[i].Value) {
			t.Fatalf("line %d: %s: want the value %q as base64", i, l, kc[i].Value)
		}
	}
}

// TestStdoutSink: with the stdout sink, stdout is the records and nothing
// else, so `replay run preview.yaml | jq` works; the tables go elsewhere.
func TestStdoutSink(t *testing.T) {
	sb, seed := newCluster(t, 3, 6000)
	dir := t.TempDir()
	file := writePlan(t, dir, planSpec{name: "preview", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(3 * time.Hour), sink: "{type: stdout}"})
	want := 0
	for i := 0; i < seed.N; i++ {
		if ts := seed.Timestamp(i); !ts.Before(seed.From.Add(time.Hour)) && ts.Before(seed.From.Add(3*time.Hour)) {
			want++
		}
	}

	r := replay(t, "run", "--yes", file)
	if r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	got := lines(r.stdout)
	for _, l := range got {
		if !gjson.Valid(l) || !gjson.Get(l, "offset").Exists() || gjson.Get(l, "topic").String() != "orders" {
			t.Fatalf("stdout line is not a record: %q", l)
		}
	}
	if len(got) != want {
		t.Errorf("stdout holds %d records, the window %d", len(got), want)
	}
	checkJSONLines(t, "stderr", r.stderr)

	// Regression: a re-run printed nothing at all (its tables go nowhere
	// when stderr carries JSON logs): the log says there is nothing to do.
	r = replay(t, "run", "--yes", file)
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("re-run: %s", r)
	}
	checkJSONLines(t, "stderr of the re-run", r.stderr)
	if !strings.Contains(r.stderr, `"level":"info"`) || !strings.Contains(r.text(), "nothing to do: plan preview already replayed every partition") {
		t.Errorf("re-run: no info line saying there is nothing to do: %s", r)
	}
}

// A run that never starts still leaves a report a scheduler can match to
// its plan, with the exit code: missing --yes (exit 2) and a refusal (exit
// 3: a file at the output path that replay did not write, which stays as
// it was).
func TestReportOfARunThatNeverStarted(t *testing.T) {
	sb, seed := newCluster(t, 2, 200)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(out, []byte("someone's notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := writePlan(t, dir, planSpec{name: "never-started", addr: sb.Addr, from: seed.From, to: seed.From.Add(time.Hour), sink: fileSink(out, 100)})
	check := func(rep, wantErr string, wantCode int) {
		t.Helper()
		r := gjson.ParseBytes(readFile(t, rep))
		if r.Get("plan").Str != "never-started" || r.Get("fingerprint").Str == "" || r.Get("group").Str == "" || r.Get("topic").Str == "" ||
			!strings.Contains(r.Get("error").Str, wantErr) || !r.Get("exit_code").Exists() || r.Get("exit_code").Int() != int64(wantCode) {
			t.Errorf("report %s: %s, want the plan's identity, an error with %q and exit_code %d", filepath.Base(rep), r.Raw, wantErr, wantCode)
		}
	}
	noYes := filepath.Join(dir, "no-yes.json")
	if r := replay(t, "run", "--report", noYes, file); r.code != exitInvalid {
		t.Fatalf("run without --yes: %s", r)
	}
	check(noYes, "add --yes", exitInvalid)
	refused := filepath.Join(dir, "refused.json")
	r := replay(t, "run", "--yes", "--report", refused, file)
	if r.code != exitRefused || !strings.Contains(r.stderr, "replay did not write") || !strings.Contains(r.stderr, "overwrite: true") || strings.Contains(r.stderr, "refused: refused") {
		t.Fatalf("run over a foreign file: %s", r)
	}
	check(refused, "replay did not write", exitRefused)
	if got := string(readFile(t, out)); got != "someone's notes\n" {
		t.Errorf("the refused run changed the file: %q", got)
	}
}
