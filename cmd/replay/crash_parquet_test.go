package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/testenv"
)

// parquetObjects returns, by name relative to dir, the rows of every
// Parquet object under dir, each row printed.
func parquetObjects(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "orders", "*", "*.parquet"))
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		pf, err := pq.OpenFile(f, fi.Size())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rel, _ := filepath.Rel(dir, path)
		rows := []string{}
		for _, rg := range pf.RowGroups() {
			rr := rg.Rows()
			buf := make([]pq.Row, 128)
			for {
				n, err := rr.ReadRows(buf)
				for _, r := range buf[:n] {
					rows = append(rows, fmt.Sprint(r))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			rr.Close()
		}
		f.Close()
		out[filepath.ToSlash(rel)] = rows
	}
	return out
}

// TestParquetResumesAfterSIGKILL: a run into a parquet sink killed at an
// arbitrary moment resumes, and ends with exactly the objects of a clean
// run: the same names, the same rows in each, no object more; a third run
// has nothing to do and changes no file.
func TestParquetResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	sb, seed := newCluster(t, crashPartitions, crashRecords)
	dir := t.TempDir()
	from, to := seed.From.Add(2*time.Hour), seed.From.Add(20*time.Hour)
	sink := func(path string) string {
		return fmt.Sprintf("{type: parquet, path: %q, batch_size: 500, max_rows_per_file: 2000, columns: {id: value.id, status: value.status, ts: timestamp, partition: partition, offset: offset, value: value}}", path)
	}
	out, cleanOut := filepath.Join(dir, "out"), filepath.Join(dir, "clean")
	throttled := writePlan(t, dir, planSpec{name: "throttled", addr: sb.Addr, from: from, to: to, recordsPerSecond: 10000, sink: sink(out)})
	clean := writePlan(t, dir, planSpec{name: "clean", addr: sb.Addr, from: from, to: to, sink: sink(cleanOut)})
	if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
		t.Fatalf("clean run: %s", r)
	}
	want := parquetObjects(t, cleanOut)
	rows := 0
	for _, r := range want {
		rows += len(r)
	}
	if len(want) < 8 || rows < 30000 {
		t.Fatalf("the clean run wrote %d objects, %d rows", len(want), rows)
	}

	p := startProcess(t, dir, "run", "--yes", throttled)
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended before it could be killed: %s", p.result())
		}
		return len(parquetObjects(t, out)) >= 3
	}, func() string { return "no three objects published" })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := p.result(); r.code != -1 {
		t.Fatalf("want the run killed, got %s", r)
	}
	if _, err := os.Stat(filepath.Join(out, "_manifest.json")); !os.IsNotExist(err) {
		t.Fatalf("a killed run wrote its manifest: %v", err)
	}
	if r := replayProcess(t, dir, "run", "--yes", throttled); r.code != exitOK || !strings.Contains(r.stdout, "resuming the run recorded in the group") {
		t.Fatalf("resumed run: want exit 0 and a resume, got %s", r)
	}
	got := parquetObjects(t, out)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range got {
			if !yield(n) {
				return
			}
		}
	})
	wantNames := slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	})
	if !slices.Equal(names, wantNames) {
		t.Fatalf("objects after the resume:\n%s\nwant a clean run's:\n%s", strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
	}
	for _, n := range names {
		if !slices.Equal(got[n], want[n]) {
			t.Errorf("%s: %d rows, differing from a clean run's %d", n, len(got[n]), len(want[n]))
		}
	}
	var m struct{ Rows int }
	data := readFile(t, filepath.Join(out, "_manifest.json"))
	if err := json.Unmarshal(data, &m); err != nil || m.Rows != rows {
		t.Errorf("manifest rows %d (%v), want %d", m.Rows, err, rows)
	}
	r := replayProcess(t, dir, "run", "--yes", throttled)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing to do") {
		t.Errorf("a third run: want exit 0 and nothing to do, got %s", r)
	}
	if again := readFile(t, filepath.Join(out, "_manifest.json")); string(again) != string(data) {
		t.Errorf("a run with nothing to do changed the manifest")
	}
	// An object deleted after the run finished is written again by the
	// next run, which says so instead of "nothing to do".
	last := names[len(names)-1]
	before := readFile(t, filepath.Join(out, last))
	if err := os.Remove(filepath.Join(out, last)); err != nil {
		t.Fatal(err)
	}
	r = replayProcess(t, dir, "run", "--yes", throttled)
	if r.code != exitOK || strings.Contains(r.stdout, "nothing to do") || !strings.Contains(r.stdout, "records written") {
		t.Errorf("a run after an object was deleted: want exit 0 and the rewrite reported, got %s", r)
	}
	if after := readFile(t, filepath.Join(out, last)); string(after) != string(before) {
		t.Errorf("%s written again differs from the deleted one", last)
	}
}
