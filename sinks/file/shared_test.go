package file_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// interleavedHarness runs the conformance suite on a file.Sink with one staging
// file for all partitions (Config.Interleave, a plan's default).
type interleavedHarness struct {
	paths sinktest.Targets[string]
}

func (h *interleavedHarness) path(t *testing.T) string {
	return h.paths.Get(t, func() string { return filepath.Join(t.TempDir(), "out", "orders.jsonl") })
}

func (h *interleavedHarness) New(t *testing.T) sinks.Sink {
	return newInterleaved(t, h.path(t), "run-1")
}

func (h *interleavedHarness) Contents(t *testing.T) []string {
	return interleavedLines(t, readFile(t, h.path(t)))
}

func TestFileInterleavedConformance(t *testing.T) {
	h := &interleavedHarness{}
	sinktest.RunWith(t, h, features(h.path))
}

func newInterleaved(t *testing.T, path, runID string) *file.Sink {
	t.Helper()
	return newFileSink(t, file.Config{Path: path, RunID: runID, Interleave: true})
}

// interleavedLines decodes an interleaved JSONL output into canonical
// Stored strings, checking that it is whole lines of JSON and that each
// partition's lines are in ascending offset order (no duplicates).
func interleavedLines(t *testing.T, data []byte) []string {
	t.Helper()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", data[max(0, len(data)-80):])
	}
	last := map[int32]int64{}
	var out []string
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		s, err := sinktest.StoredLine(line)
		if err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, line)
		}
		if prev, ok := last[s.Partition]; ok && s.Offset <= prev {
			t.Fatalf("line %d: partition %d offset %d after offset %d: a partition's lines must be in offset order, once each", i+1, s.Partition, s.Offset, prev)
		}
		last[s.Partition] = s.Offset
		out = append(out, s.String())
	}
	return out
}

func sharedStaging(path string) string { return filepath.Join(path+".parts", "records.jsonl") }

// A crash in the middle of a write leaves a torn last line in the one
// staging file; the records after it are lost with it and delivered again.
func TestFileInterleavedTornLastLine(t *testing.T) {
	window := sinktest.Window(30, 3)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newInterleaved(t, path, "run-1")
	for _, part := range window {
		if err := f.Write(t.Context(), part[:len(part)/2]); err != nil {
			t.Fatal(err)
		}
	}
	torn := encode.AppendJSONL(nil, &window[1][len(window[1])/2])
	fh, err := os.OpenFile(sharedStaging(path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(torn[:len(torn)/2]); err != nil {
		t.Fatal(err)
	}
	fh.Close()

	resumed := newInterleaved(t, path, "run-1")
	for _, part := range window {
		if err := resumed.Write(t.Context(), part[len(part)/4:]); err != nil { // re-delivers a quarter
			t.Fatal(err)
		}
	}
	finishFile(t, resumed)
	sinktest.Equal(t, "output after a torn line", interleavedLines(t, readFile(t, path)), sinktest.Want(window))
	if _, err := os.Stat(path + ".parts"); !os.IsNotExist(err) {
		t.Errorf("staging left after Finish: %v", err)
	}
}

// A crash after the output was renamed into place but before the staging
// was removed: the next Finish publishes the same output again.
func TestFileInterleavedFinishAfterCrashInPublish(t *testing.T) {
	window := sinktest.Window(31, 2)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newInterleaved(t, path, "run-1")
	sinktest.WriteAll(t, f, window, 3, 5)
	if err := f.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(sharedStaging(path), path); err != nil { // what publishing did before the crash
		t.Fatal(err)
	}
	again := newInterleaved(t, path, "run-1") // nothing left to write: every partition is done
	finishFile(t, again)
	sinktest.Equal(t, "output", interleavedLines(t, readFile(t, path)), sinktest.Want(window))
	if _, err := os.Stat(path + ".parts"); !os.IsNotExist(err) {
		t.Errorf("staging left after Finish: %v", err)
	}
}

// After a crash between publishing (a hard link) and removing the staging,
// the next Finish finds the output already linked to the staging file:
// renaming a link over another link of the same file is a no-op that
// succeeds, and the temporary link must not be left next to the output.
// (Per partition: a staging file this process does not reopen keeps its
// link; the interleaved file is copied apart when reopened.)
func TestFileRepublishLeavesNoTemporaryLink(t *testing.T) {
	window := sinktest.Window(37, 1)
	dir := t.TempDir()
	pattern := filepath.Join(dir, "out-{partition}.jsonl")
	cfg := file.Config{Path: pattern, RunID: "run-1", PerPartition: true}
	f := newFileSink(t, cfg)
	sinktest.WriteAll(t, f, window, 8, 5)
	if err := f.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out-0.jsonl")
	if err := os.Link(filepath.Join(pattern+".parts", "partition-0.jsonl"), out); err != nil { // published, then the crash
		t.Fatal(err)
	}
	finishFile(t, newFileSink(t, cfg)) // nothing to write: every partition is done
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("files left next to the output: %v", left)
	}
	sinktest.Equal(t, "output", interleavedLines(t, readFile(t, out)), sinktest.Want(window))
}

// After a crash between publishing per-partition files (hard links to the
// staging files) and removing the staging, a run of the same identity that
// delivers a partition again (a rewind truncates its staging file) must not
// change the published file in place: the staging file gets its own copy.
func TestFilePublishedStagingUnshared(t *testing.T) {
	window := sinktest.Window(35, 1)
	dir := t.TempDir()
	pattern := filepath.Join(dir, "out-{partition}.jsonl")
	cfg := file.Config{Path: pattern, RunID: "run-1", PerPartition: true}
	f := newFileSink(t, cfg)
	sinktest.WriteAll(t, f, window, 6, 5)
	if err := f.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out-0.jsonl")
	if err := os.Link(filepath.Join(pattern+".parts", "partition-0.jsonl"), out); err != nil { // published, then the crash
		t.Fatal(err)
	}
	published := readFile(t, out)
	again := newFileSink(t, cfg)
	if err := again.Write(t.Context(), window[0][:3]); err != nil { // delivered again from the start: a rewind
		t.Fatal(err)
	}
	if got := readFile(t, out); !bytes.Equal(got, published) {
		t.Fatalf("the published file changed in place: %d bytes, was %d", len(got), len(published))
	}
	if err := again.Write(t.Context(), window[0][3:]); err != nil {
		t.Fatal(err)
	}
	finishFile(t, again)
	if got := readFile(t, out); !bytes.Equal(got, published) {
		t.Errorf("published again: %d bytes, want the same %d", len(got), len(published))
	}
}

// Finish publishes the staging file itself (a hard link), not a copy: the
// output is written to disk once.
func TestFileInterleavedPublishesWithoutCopy(t *testing.T) {
	window := sinktest.Window(32, 2)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newInterleaved(t, path, "run-1")
	sinktest.WriteAll(t, f, window, 4, 7)
	st, err := os.Stat(sharedStaging(path))
	if err != nil {
		t.Fatal(err)
	}
	staged := st.Sys().(*syscall.Stat_t).Ino
	finishFile(t, f)
	out, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if ino := out.Sys().(*syscall.Stat_t).Ino; ino != staged {
		t.Errorf("the output is inode %d, the staging file was %d: Finish copied it", ino, staged)
	}
	if out.Mode().Perm() != 0o644 {
		t.Errorf("output mode %v, want 0644", out.Mode().Perm())
	}
	sinktest.Equal(t, "output", interleavedLines(t, readFile(t, path)), sinktest.Want(window))
}

// A staging file holding a line that is not replay's (no partition and
// offset) is refused, not truncated or published.
func TestFileInterleavedForeignStagingRefused(t *testing.T) {
	window := sinktest.Window(33, 1)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newInterleaved(t, path, "run-1")
	sinktest.WriteAll(t, f, window, 5, 5)
	fh, err := os.OpenFile(sharedStaging(path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("{\"hello\":1}\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	before := readFile(t, sharedStaging(path))
	resumed := newInterleaved(t, path, "run-1")
	err = resumed.Write(t.Context(), window[0][:1])
	if err == nil || !strings.Contains(err.Error(), "not replay's") {
		t.Fatalf("want an error naming a staging file that is not replay's, got %v", err)
	}
	if got := readFile(t, sharedStaging(path)); !bytes.Equal(got, before) {
		t.Errorf("the staging file was changed")
	}
}

// Found in review: after a power loss, a file system may keep later writes
// of the interleaved staging file and zero earlier ones that were never
// fsynced. Recovery read the partition and offset out of such a line and
// skipped the lost records on re-delivery. A line that is not JSON now
// ends the file there when it lies past what the last commit made durable,
// and is an error below it.
func TestFileInterleavedZeroedTail(t *testing.T) {
	window := sinktest.Window(36, 2)
	for _, tc := range []struct {
		name    string
		hole    func(durable, size int64) int64 // where the zeros start
		unknown bool                            // commits of a version that recorded no position
		refused bool
	}{
		{"hole past the durable data", func(durable, size int64) int64 { return durable + (size-durable)/3 }, false, false},
		{"hole below the durable data", func(durable, size int64) int64 { return durable / 2 }, false, true},
		{"durable position unknown", func(durable, size int64) int64 { return durable + (size-durable)/3 }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			f := newInterleaved(t, path, "run-1")
			for _, part := range window {
				if err := f.Write(t.Context(), part[:len(part)/2]); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Sync(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			durable := f.SyncedPosition(0)
			for _, part := range window {
				if err := f.Write(t.Context(), part[len(part)/2:len(part)*3/4]); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			staging := sharedStaging(path)
			st, err := os.Stat(staging)
			if err != nil {
				t.Fatal(err)
			}
			fh, err := os.OpenFile(staging, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteAt(make([]byte, 300), tc.hole(durable, st.Size())); err != nil {
				t.Fatal(err)
			}
			fh.Close()

			resumed := newInterleaved(t, path, "run-1")
			pts := []sinks.ResumePoint{
				{Partition: 0, Start: window[0][0].Offset, Committed: window[0][len(window[0])/2].Offset, End: window[0][len(window[0])-1].Offset + 1, Position: durable},
				{Partition: 1, Start: window[1][0].Offset, Committed: window[1][len(window[1])/2].Offset, End: window[1][len(window[1])-1].Offset + 1, Position: durable},
			}
			if tc.unknown {
				pts[0].Position, pts[1].Position = 0, 0
			}
			if err := resumed.CheckResume(pts); err != nil {
				t.Fatal(err)
			}
			var werr error
			for _, part := range window {
				if werr = resumed.Write(t.Context(), part[len(part)/2:]); werr != nil {
					break
				}
			}
			if tc.refused {
				if werr == nil || !strings.Contains(werr.Error(), "damaged") {
					t.Fatalf("a hole below the durable data: want an error naming the damage, got %v", werr)
				}
				return
			}
			if werr != nil {
				t.Fatal(werr)
			}
			finishFile(t, resumed)
			sinktest.Equal(t, "output after a zeroed tail", interleavedLines(t, readFile(t, path)), sinktest.Want(window))
		})
	}
}

// Many partitions writing and syncing at once into the one staging file:
// each Sync checks the file still holds what was made durable, which
// another partition's Sync moves on meanwhile; a whole file is never taken
// for a cut one.
func TestFileInterleavedConcurrentSyncs(t *testing.T) {
	const partitions = 64
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newInterleaved(t, path, "run-1")
	window := sinktest.Window(7, partitions)
	var wg sync.WaitGroup
	errs := make(chan error, partitions)
	for _, part := range window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range part {
				if err := f.Write(t.Context(), part[i:i+1]); err != nil {
					errs <- err
					return
				}
				if err := f.Sync(t.Context(), part[i].Partition); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
