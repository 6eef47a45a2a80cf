package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

// guardSetup seeds a broker and writes a plan throttled to rps records per
// second (37500 records in its window) writing to sinkPath, and a clean
// reference plan, which it runs.
func guardSetup(t *testing.T, sinkPath string, rps int) (dir, planFile, cleanOut string) {
	t.Helper()
	sb, seed := newCluster(t, crashPartitions, crashRecords)
	dir = t.TempDir()
	from, to := seed.From.Add(2*time.Hour), seed.From.Add(20*time.Hour) // 37500 records
	cleanOut = filepath.Join(dir, "clean", "orders.jsonl")
	planFile = writePlan(t, dir, planSpec{name: "guarded", addr: sb.Addr, from: from, to: to, recordsPerSecond: rps, sink: fileSink(sinkPath, 500)})
	clean := writePlan(t, dir, planSpec{name: "clean", addr: sb.Addr, from: from, to: to, sink: fileSink(cleanOut, 500)})
	if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
		t.Fatalf("clean run: %s", r)
	}
	return dir, planFile, cleanOut
}

func mustNotExist(t *testing.T, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s: %s exists (stat: %v)", why, path, err)
	}
}

// Regression: a run with a relative sink path, interrupted, then re-run
// from another working directory "resumed" there: it wrote the remainder
// of the window only, published that partial file and exited 0. It is
// refused now (exit 3), changing nothing, and resuming from the first
// directory still completes to a clean run's output.
func TestRunRefusesResumeFromAnotherDirectory(t *testing.T) {
	t.Parallel()
	dir, planFile, cleanOut := guardSetup(t, "out/orders.jsonl", 10000)
	first, other := filepath.Join(dir, "first"), filepath.Join(dir, "other")
	for _, d := range []string{first, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(first, "out", "orders.jsonl")
	p := startUntilProgress(t, first, planFile, out, 2000)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.result(); r.code != exitFailed {
		t.Fatalf("interrupted run: %s", r)
	}
	before := checkpoints(t, planFile, crashPartitions)

	r := replayProcess(t, other, "run", "--yes", planFile)
	if r.code != exitRefused {
		t.Fatalf("resume from another directory: want exit %d, got %s", exitRefused, r)
	}
	staging := filepath.Join(other, "out", "orders.jsonl.parts")
	for _, want := range []string{"refused", staging + " does not exist", "working directory of the first run", "replay run PLAN --restart"} {
		if !strings.Contains(r.text(), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, r)
		}
	}
	mustNotExist(t, filepath.Join(other, "out", "orders.jsonl"), "the refused run published")
	mustNotExist(t, staging, "the refused run staged")
	after := checkpoints(t, planFile, crashPartitions)
	for part, cp := range before {
		if after[part] != cp {
			t.Errorf("partition %d: the refused run changed the commit %+v to %+v", part, cp, after[part])
		}
	}

	if r := replayProcess(t, first, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("resume from the first directory: %s", r)
	}
	checkFinished(t, first, planFile, out, cleanOut)
}

// Regression: two `replay run` of the same file-sink plan both proceeded,
// writing the same staging files. The second is refused at once (exit 3:
// the first holds the plan's group, before the lock next to the output is
// even tried) and changes nothing; the first completes to a clean run's
// output.
func TestRunRefusesConcurrentRun(t *testing.T) {
	t.Parallel()
	outDir := filepath.Join(t.TempDir(), "out")
	out := filepath.Join(outDir, "orders.jsonl")
	dir, planFile, cleanOut := guardSetup(t, out, 6000)
	p := startUntilProgress(t, dir, planFile, out, 1000)

	start := time.Now()
	r := replayProcess(t, dir, "run", "--yes", planFile)
	if p.exited() {
		t.Fatalf("the first run ended before the second one did: the test proves nothing\nfirst: %s\nsecond: %s", p.result(), r)
	}
	if r.code != exitRefused {
		t.Fatalf("a second run of the same plan: want exit %d, got %s", exitRefused, r)
	}
	lock := filepath.Join(outDir, ".orders.jsonl.lock")
	host, _ := os.Hostname()
	want := "a run of this plan holds it (host " + host + ", pid " + strconv.Itoa(p.cmd.Process.Pid) + ", since "
	if !strings.Contains(r.text(), want) {
		t.Errorf("the second run's error lacks %q:\n%s", want, r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the second run took %v: it must fail at once", d)
	}
	if r := p.result(); r.code != exitOK {
		t.Fatalf("the first run: %s", r)
	}
	mustNotExist(t, lock, "after the run")
	checkFinished(t, dir, planFile, out, cleanOut)
}

// Regression: a file sink whose path is a directory replayed the whole
// window and committed it, then failed to publish. It fails at once now,
// committing nothing.
func TestRunRefusesDirectoryPath(t *testing.T) {
	t.Parallel()
	sb, seed := newCluster(t, 2, 1000)
	dir := t.TempDir()
	outDir := filepath.Join(dir, "exports")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	planFile := writePlan(t, dir, planSpec{name: "dirpath", addr: sb.Addr, from: seed.From, to: seed.To, sink: fileSink(outDir, 100)})
	r := replay(t, "run", "--yes", planFile)
	// 1: the file sink refuses the path (2 if plan validation learns to).
	if r.code != exitFailed && r.code != exitInvalid {
		t.Fatalf("want exit %d, got %s", exitFailed, r)
	}
	if !strings.Contains(r.text(), outDir+" is a directory") {
		t.Errorf("the error does not say the path is a directory:\n%s", r)
	}
	for part, cp := range checkpoints(t, planFile, 2) {
		if cp.Offset >= 0 {
			t.Errorf("partition %d: committed %d, want nothing committed", part, cp.Offset)
		}
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("the refused run wrote into %s: %v", outDir, entries)
	}
}

// Found by a break-it pass: a run killed mid-way, its staging file emptied
// (or truncated below what was committed), then resumed, exited 0 with an
// output missing every record below the commits. The commit now records
// how much of the staging was durable; the resume is refused (exit 3),
// changes nothing, and --restart replays the window whole.
func TestRunRefusesTruncatedStaging(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"interleaved", "partition"} {
		t.Run("order="+order, func(t *testing.T) {
			t.Parallel()
			dir, throttled, out, clean, cleanOut := crashSetupOrder(t, order)
			if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
				t.Fatalf("clean run: %s", r)
			}
			p := startUntilProgress(t, dir, throttled, out, 5000)
			testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
				for _, cp := range checkpoints(t, throttled, crashPartitions) {
					if cp.Replay && cp.Position > 0 {
						return true
					}
				}
				return false
			}, "a commit recording the staging's durable position")
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.result()
			files, _ := filepath.Glob(filepath.Join(out+".parts", "*.jsonl"))
			if len(files) == 0 {
				t.Fatal("no staging file")
			}
			for _, f := range files {
				if err := os.Truncate(f, 0); err != nil {
					t.Fatal(err)
				}
			}
			before := checkpoints(t, throttled, crashPartitions)
			r := replayProcess(t, dir, "run", "--yes", throttled)
			if r.code != exitRefused {
				t.Fatalf("resume over emptied staging: want exit %d, got %s", exitRefused, r)
			}
			for _, want := range []string{"truncated or emptied", "replay run PLAN --restart"} {
				if !strings.Contains(r.text(), want) {
					t.Errorf("the refusal lacks %q:\n%s", want, r)
				}
			}
			if strings.Contains(r.stdout, "records written") {
				t.Errorf("a refused run printed a run summary:\n%s", r.stdout)
			}
			mustNotExist(t, out, "the refused run published")
			for part, cp := range checkpoints(t, throttled, crashPartitions) {
				if cp != before[part] {
					t.Errorf("partition %d: the refused run changed the commit %+v to %+v", part, before[part], cp)
				}
			}
			if r := replayProcess(t, dir, "run", "--yes", "--restart", throttled); r.code != exitOK {
				t.Fatalf("--restart: %s", r)
			}
			checkFinished(t, dir, throttled, out, cleanOut)
		})
	}
}
