package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/group"
)

const (
	crashPartitions = 4
	crashRecords    = 50000
)

// crashSetup seeds a broker and writes two plans over the same window: a
// throttled one (a run takes a few seconds, long enough to be stopped) and a
// clean reference one with another group and another output file, both
// with the file sink's default line order.
func crashSetup(t *testing.T) (dir, throttled, throttledOut, clean, cleanOut string) {
	return crashSetupOrder(t, "")
}

// crashSetupOrder is crashSetup with the file sinks' order set (if not "").
func crashSetupOrder(t *testing.T, order string) (dir, throttled, throttledOut, clean, cleanOut string) {
	t.Helper()
	sb, seed := newCluster(t, crashPartitions, crashRecords)
	dir = t.TempDir()
	from, to := seed.From.Add(2*time.Hour), seed.From.Add(20*time.Hour) // 37500 records
	throttledOut = filepath.Join(dir, "out", "orders.jsonl")
	cleanOut = filepath.Join(dir, "clean", "orders.jsonl")
	sink := func(path string) string {
		if order == "" {
			return fileSink(path, 500)
		}
		return fmt.Sprintf("{type: file, path: %q, batch_size: 500, order: %s}", path, order)
	}
	throttled = writePlan(t, dir, planSpec{name: "throttled", addr: sb.Addr, from: from, to: to,
		recordsPerSecond: 10000, sink: sink(throttledOut)})
	clean = writePlan(t, dir, planSpec{name: "clean", addr: sb.Addr, from: from, to: to, sink: sink(cleanOut)})
	return dir, throttled, throttledOut, clean, cleanOut
}

// startUntilProgress starts `replay run plan` and waits until its file sink
// staged at least minLines records; the run must still be going then.
func startUntilProgress(t *testing.T, dir, planFile, out string, minLines int) *process {
	t.Helper()
	p := startProcess(t, dir, "run", "--yes", planFile)
	n := 0
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, func() bool {
		n = stagedLines(t, out)
		if p.exited() {
			t.Fatalf("the run ended before it could be stopped (%d records staged): %s", n, p.result())
		}
		return n >= minLines
	}, func() string { return fmt.Sprintf("%d records staged, want %d", n, minLines) })
	return p
}

// stagedLines counts the complete lines staged by the file sink writing
// to out. It is the progress poll of startUntilProgress: counting newlines
// keeps each poll short where parsing every line (staged) took long enough
// under -race on a loaded machine for the run to finish between two polls.
func stagedLines(t *testing.T, out string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out+".parts", "*.jsonl"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) { // published meanwhile: the run ended
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte{'\n'})
	}
	return n
}

// staged returns, per partition, the offsets of the complete lines staged
// by the file sink writing to out: in each partition's staging file
// (order: partition) or in the one staging file of all (interleaved).
func staged(t *testing.T, out string) map[int32][]int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out+".parts", "*.jsonl"))
	res := map[int32][]int64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1] // a torn last line is not a record
		} else {
			b = nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r := gjson.ParseBytes(sc.Bytes())
			p := int32(r.Get("partition").Int())
			res[p] = append(res[p], r.Get("offset").Int())
		}
	}
	return res
}

// checkFinished checks that the run's output holds the clean run's lines,
// each once, each partition's in offset order (and, in partition order,
// equals it byte for byte), that the group committed every partition to its
// end, and that one more run has nothing to do.
func checkFinished(t *testing.T, dir, planFile, out, cleanOut string) {
	t.Helper()
	got, want := readFile(t, out), readFile(t, cleanOut)
	if n := bytes.Count(want, []byte("\n")); n < 30000 {
		t.Fatalf("the clean run wrote only %d records", n)
	}
	if !sameLines(t, got, want) {
		t.Errorf("output after the resume (%d bytes, %d records) differs from a clean run (%d bytes, %d records)",
			len(got), bytes.Count(got, []byte("\n")), len(want), bytes.Count(want, []byte("\n")))
	}
	for p, cp := range checkpoints(t, planFile, crashPartitions) {
		if !cp.Replay || cp.Offset != cp.End || cp.End <= cp.Start {
			t.Errorf("partition %d: committed %d, range [%d, %d) (replay commit: %v); want the end", p, cp.Offset, cp.Start, cp.End, cp.Replay)
		}
	}
	if _, err := os.Stat(out + ".parts"); !os.IsNotExist(err) {
		t.Errorf("staging directory left behind after the run finished: %v", err)
	}
	r := replayProcess(t, dir, "run", "--yes", planFile)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
		t.Errorf("a third run: want exit 0 and nothing to do, got %s", r)
	}
	if !bytes.Equal(readFile(t, out), got) {
		t.Errorf("a run with nothing to do changed the output")
	}
}

// TestRunResumesAfterSIGKILL: a run killed at an arbitrary moment (no chance
// to finish its batch or commit) resumes from the group's checkpoints, and
// the result is exactly one clean run's output.
func TestRunResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"interleaved", "partition"} {
		t.Run("order="+order, func(t *testing.T) {
			t.Parallel()
			testResumesAfterSIGKILL(t, order)
		})
	}
}

func testResumesAfterSIGKILL(t *testing.T, order string) {
	dir, throttled, out, clean, cleanOut := crashSetupOrder(t, order)
	if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
		t.Fatalf("clean run: %s", r)
	}

	p := startUntilProgress(t, dir, throttled, out, 5000)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := p.result(); r.code != -1 {
		t.Fatalf("want the run killed, got %s", r)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a killed run published its output: %v", err)
	}
	// Nothing is ever committed past what the sink holds.
	stagedOffsets := staged(t, out)
	cps := checkpoints(t, throttled, crashPartitions)
	for part, cp := range cps {
		offs := stagedOffsets[part]
		if held := cp.Start + int64(len(offs)); cp.Offset > held {
			t.Errorf("partition %d: committed %d, but the sink holds only up to %d", part, cp.Offset, held)
		}
	}
	// The kill mostly lands in the throttle's wait, where the sink holds
	// exactly what is committed. Widen it to the worst moment: batches
	// written but not committed, and a torn last line, as a kill between
	// fsync and commit or in the middle of a write leaves them.
	writtenNotCommitted(t, out, cleanOut, cps)

	r := replayProcess(t, dir, "run", "--yes", throttled)
	if r.code != exitOK {
		t.Fatalf("resumed run: %s", r)
	}
	if !strings.Contains(r.stdout, "resuming the run recorded in the group") {
		t.Errorf("the second run did not resume:\n%s", r)
	}
	checkFinished(t, dir, throttled, out, cleanOut)
	if order == "partition" && !bytes.Equal(readFile(t, out), readFile(t, cleanOut)) {
		t.Errorf("order: partition: the output after the resume is not byte-identical to a clean run's")
	}
}

// sameLines reports whether got holds the lines of want, each once, whole
// (ending in a newline), with each partition's in ascending offset order.
// Lines of different partitions may interleave (the default order).
func sameLines(t *testing.T, got, want []byte) bool {
	t.Helper()
	if len(got) > 0 && got[len(got)-1] != '\n' {
		t.Errorf("the output does not end in a newline")
		return false
	}
	last := map[int64]int64{}
	gl := lines(string(got))
	for i, l := range gl {
		p, off := gjson.Get(l, "partition").Int(), gjson.Get(l, "offset").Int()
		if prev, ok := last[p]; ok && off <= prev {
			t.Errorf("line %d: partition %d offset %d after offset %d", i+1, p, off, prev)
			return false
		}
		last[p] = off
	}
	return slices.Equal(slices.Sorted(slices.Values(gl)), slices.Sorted(slices.Values(lines(string(want)))))
}

// writtenNotCommitted appends to each partition's staging file (or, with
// one staging file for all, to it) the next records after its checkpoint
// (as the clean run wrote them) and half a line.
func writtenNotCommitted(t *testing.T, out, cleanOut string, cps map[int32]group.Checkpoint) {
	t.Helper()
	held := staged(t, out)
	next := map[int32][]string{}
	for _, l := range lines(string(readFile(t, cleanOut))) {
		p, off := int32(gjson.Get(l, "partition").Int()), gjson.Get(l, "offset").Int()
		if cp := cps[p]; off >= cp.Offset && len(next[p]) < 700 {
			next[p] = append(next[p], l)
		}
	}
	shared := filepath.Join(out+".parts", "records.jsonl")
	if _, err := os.Stat(shared); err == nil {
		// One staging file for all partitions: only its end can be torn.
		b := readFile(t, shared)
		b = b[:bytes.LastIndexByte(b, '\n')+1] // the kill may have torn it already
		var tail string
		for part, cp := range cps {
			offs := held[part]
			if len(offs) > 0 && offs[len(offs)-1]+1 != cp.Offset || len(next[part]) == 0 {
				continue
			}
			b = append(b, strings.Join(next[part], "\n")+"\n"...)
			tail = next[part][len(next[part])-1]
		}
		if err := os.WriteFile(shared, append(b, tail[:len(tail)/2]...), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for part, cp := range cps {
		offs := held[part]
		if len(offs) > 0 && offs[len(offs)-1]+1 != cp.Offset {
			t.Logf("partition %d: the kill left records %d..%d written but not committed", part, cp.Offset, offs[len(offs)-1])
			continue
		}
		if len(next[part]) == 0 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(out+".parts", fmt.Sprintf("partition-%d.jsonl", part)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		last := next[part][len(next[part])-1]
		_, err = f.WriteString(strings.Join(next[part][:len(next[part])-1], "\n") + "\n" + last[:len(last)/2])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunStopsOnSIGTERM: SIGTERM finishes the in-flight batch, commits,
// exits 1 with a resume hint; the commits match exactly what the sink holds,
// and re-running completes to a clean run's output.
func TestRunStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	dir, throttled, out, clean, cleanOut := crashSetup(t)
	if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
		t.Fatalf("clean run: %s", r)
	}

	p := startUntilProgress(t, dir, throttled, out, 5000)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.result()
	if r.code != exitFailed {
		t.Fatalf("want exit %d after SIGTERM, got %s", exitFailed, r)
	}
	if !strings.Contains(r.stdout+r.text(), "resume with: replay run "+throttled+" --yes") {
		t.Errorf("no resume hint:\n%s", r)
	}
	if !strings.Contains(r.stdout, "stopped") {
		t.Errorf("the summary does not show stopped partitions:\n%s", r)
	}
	checkJSONLines(t, "stderr of an interrupted run", r.stderr)

	stagedOffsets := staged(t, out)
	total := 0
	for part, cp := range checkpoints(t, throttled, crashPartitions) {
		offs := stagedOffsets[part]
		total += len(offs)
		if !cp.Replay {
			t.Fatalf("partition %d: no replay checkpoint: %+v", part, cp)
		}
		want := cp.Start
		if len(offs) > 0 {
			want = offs[len(offs)-1] + 1
		}
		if cp.Offset != want || cp.Offset-cp.Start != int64(len(offs)) {
			t.Errorf("partition %d: committed %d, range starts at %d, the sink holds %d records up to offset %d",
				part, cp.Offset, cp.Start, len(offs), want-1)
		}
	}
	if total == 0 || total >= 37500 {
		t.Fatalf("the sink holds %d records: the run was not stopped in the middle", total)
	}

	r = replayProcess(t, dir, "run", "--yes", throttled)
	if r.code != exitOK {
		t.Fatalf("resumed run: %s", r)
	}
	checkFinished(t, dir, throttled, out, cleanOut)
}
