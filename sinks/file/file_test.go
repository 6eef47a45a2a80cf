package file_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// fileHarness runs the conformance suite on file.Sink: a target is an output
// path in a test's temporary directory, reopened with the same run ID.
type fileHarness struct {
	paths sinktest.Targets[string]
}

func (h *fileHarness) path(t *testing.T) string {
	return h.paths.Get(t, func() string { return filepath.Join(t.TempDir(), "out", "orders.jsonl") })
}

func (h *fileHarness) New(t *testing.T) sinks.Sink { return newFile(t, h.path(t), "run-1") }

func (h *fileHarness) Contents(t *testing.T) []string {
	data, err := os.ReadFile(h.path(t))
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	return storedLines(t, data)
}

func (h *fileHarness) Records(t *testing.T) []record.Record {
	data, err := os.ReadFile(h.path(t))
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	return sinktest.DecodeLines(t, data)
}

func TestFileConformance(t *testing.T) {
	h := &fileHarness{}
	f := features(h.path)
	f.Contents = true
	sinktest.RunWith(t, h, f)
}

// features declares a file sink's, for a harness whose target t is the
// output path(t): durable once Sync returns, a resume check of the staging,
// and synced positions (bytes of a staging file). Losing the output
// removes the staging directory, as a cleanup between two runs would.
func features(path func(t *testing.T) string) sinktest.Features {
	return sinktest.Features{Durable: sinktest.OnSync, Resumes: true, Positions: true, LoseOutput: func(t *testing.T) {
		if err := os.RemoveAll(path(t) + ".parts"); err != nil {
			t.Fatal(err)
		}
	}}
}

func newFile(t *testing.T, path, runID string) *file.Sink {
	t.Helper()
	return newFileSink(t, file.Config{Path: path, RunID: runID})
}

// storedLines decodes a JSONL output into canonical Stored strings, checking
// that it is whole lines of valid UTF-8 JSON in partition and offset order.
func storedLines(t *testing.T, data []byte) []string {
	t.Helper()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", data[max(0, len(data)-80):])
	}
	if !utf8.Valid(data) {
		t.Fatal("output is not valid UTF-8")
	}
	var out []string
	var prev sinktest.Stored
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		s, err := sinktest.StoredLine(line)
		if err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, line)
		}
		if i > 0 && (s.Partition < prev.Partition || s.Partition == prev.Partition && s.Offset <= prev.Offset) {
			t.Fatalf("line %d: %d@%d after %d@%d: lines must be in partition and offset order", i+1, s.Partition, s.Offset, prev.Partition, prev.Offset)
		}
		prev = s
		out = append(out, s.String())
	}
	return out
}

func finishFile(t *testing.T, s sinks.Sink) {
	t.Helper()
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// cleanRun returns the output of one uninterrupted run of window.
func cleanRun(t *testing.T, window [][]record.Record) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clean.jsonl")
	f := newFile(t, path, "run-1")
	sinktest.WriteAll(t, f, window, 1, 10)
	finishFile(t, f)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestFileTornLastLineRecovered(t *testing.T) {
	window := sinktest.Window(20, 2)
	want := cleanRun(t, window)
	for _, tc := range []struct {
		name string
		from func(part []record.Record) int // where the resumed run re-delivers from
	}{
		{"resume after the torn record", func(part []record.Record) int { return len(part) / 2 }},
		{"resume from an earlier offset", func(part []record.Record) int { return len(part) / 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			f := newFile(t, path, "run-1")
			for _, part := range window {
				if err := f.Write(t.Context(), part[:len(part)/2]); err != nil {
					t.Fatal(err)
				}
			}
			// A crash in the middle of a write: half a line, no newline.
			torn := encode.AppendJSONL(nil, &window[0][len(window[0])/2])
			staging := filepath.Join(path+".parts", "partition-0.jsonl")
			fh, err := os.OpenFile(staging, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.Write(torn[:len(torn)/2]); err != nil {
				t.Fatal(err)
			}
			fh.Close()

			resumed := newFile(t, path, "run-1")
			for _, part := range window {
				if err := resumed.Write(t.Context(), part[tc.from(part):]); err != nil {
					t.Fatal(err)
				}
			}
			finishFile(t, resumed)
			if got := readFile(t, path); !bytes.Equal(got, want) {
				t.Errorf("output after a torn line differs from a clean run:\n%s", firstDiff(got, want))
			}
		})
	}
}

// Regression: recovery read lines through bufio.Reader.ReadSlice and kept a
// slice into its buffer across the next read, so a line over 1 MiB (here a
// 200 kB binary value, escaped to 1.2 MB) was read back with its first MiB
// overwritten: its offset was lost and the rewind failed.
func TestFileLongLinesResume(t *testing.T) {
	window := sinktest.Window(21, 1)
	big := bytes.Repeat([]byte{0x01}, 200_000)
	part := window[0]
	for _, i := range []int{1, len(part) / 2, len(part) - 2} {
		part[i].Value = big
	}
	want := cleanRun(t, window)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f := newFile(t, path, "run-1")
	sinktest.WriteAll(t, f, window, 2, 4)
	resumed := newFile(t, path, "run-1") // crash, reopen, re-deliver from offsets inside the file
	for _, from := range []int{len(part) - 2, len(part) / 2, 1} {
		if err := resumed.Write(t.Context(), part[from:]); err != nil {
			t.Fatalf("re-deliver from %d: %v", part[from].Offset, err)
		}
	}
	finishFile(t, resumed)
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Errorf("output differs from a clean run:\n%s", firstDiff(got, want))
	}
}

func TestFileByteIdenticalRuns(t *testing.T) {
	window := sinktest.Window(22, 4)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")

	fa := newFile(t, a, "run-1")
	sinktest.WriteAll(t, fa, window, 1, 3)
	finishFile(t, fa)

	// Another batching, partitions written in reverse order.
	fb := newFile(t, b, "run-1")
	rev := slices.Clone(window)
	slices.Reverse(rev)
	sinktest.WriteAll(t, fb, rev, 2, 17)
	finishFile(t, fb)

	got, want := readFile(t, b), readFile(t, a)
	if !bytes.Equal(got, want) {
		t.Fatalf("two clean runs differ:\n%s", firstDiff(got, want))
	}
	sinktest.Equal(t, "contents", storedLines(t, got), sinktest.Want(window))

	// A re-run over the finished output rewrites the same bytes.
	again := newFile(t, a, "run-1")
	sinktest.WriteAll(t, again, window, 3, 8)
	finishFile(t, again)
	if got := readFile(t, a); !bytes.Equal(got, want) {
		t.Fatalf("re-run differs:\n%s", firstDiff(got, want))
	}
	// Regression: the output was published from os.CreateTemp and kept its
	// 0600 mode, unreadable by anyone but the owner.
	st, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("output mode %v, want 0644", st.Mode().Perm())
	}
	for _, leftover := range []string{a + ".parts", a + ".parts-done"} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Errorf("%s left after Finish (stat: %v)", leftover, err)
		}
	}
}

func TestFileStagingFromAnotherRunDiscarded(t *testing.T) {
	old := sinktest.Window(23, 3)
	window := sinktest.Window(24, 2)

	t.Run("this run writes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		sinktest.WriteAll(t, newFile(t, path, "run-A"), old, 1, 10) // crashed, never finished
		f := newFile(t, path, "run-B")
		sinktest.WriteAll(t, f, window, 1, 10)
		finishFile(t, f)
		sinktest.Equal(t, "contents", storedLines(t, readFile(t, path)), sinktest.Want(window))
	})

	// Regression: a run that wrote nothing (an empty window) published the
	// other run's staging as its own output.
	t.Run("this run writes nothing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		sinktest.WriteAll(t, newFile(t, path, "run-A"), old, 1, 10)
		f := newFile(t, path, "run-B")
		finishFile(t, f)
		if got := readFile(t, path); len(got) != 0 {
			t.Errorf("output holds %d bytes of another run's staging, want an empty file", len(got))
		}
	})

	t.Run("the same run resumes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		sinktest.WriteAll(t, newFile(t, path, "run-A"), old, 1, 10)
		f := newFile(t, path, "run-A") // everything was written: only Finish is left
		finishFile(t, f)
		sinktest.Equal(t, "contents", storedLines(t, readFile(t, path)), sinktest.Want(old))
	})
}

func TestFileFinishWithoutStaging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.jsonl")
	f := newFile(t, path, "run-1")
	finishFile(t, f)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("Finish with no staging did not create the output: %v", err)
	}
	if st.Size() != 0 {
		t.Fatalf("output has %d bytes, want 0", st.Size())
	}

	// A finished run's output is left alone by a Finish after a crash.
	sinktest.WriteAll(t, newFile(t, path, "run-2"), sinktest.Window(5, 1), 1, 10)
	finishFile(t, newFile(t, path, "run-2"))
	published := readFile(t, path)
	if len(published) == 0 {
		t.Fatal("run-2 published nothing")
	}
	// Leftover of a crash in the middle of removing published staging.
	if err := os.MkdirAll(path+".parts-done", 0o755); err != nil {
		t.Fatal(err)
	}
	finishFile(t, newFile(t, path, "run-2"))
	if got := readFile(t, path); string(got) != string(published) {
		t.Errorf("Finish with no staging rewrote the output of its own run: %d bytes, want %d", len(got), len(published))
	}
	if _, err := os.Stat(path + ".parts-done"); !os.IsNotExist(err) {
		t.Errorf("leftover staging not removed (stat: %v)", err)
	}
}

func TestNewFileEmptyPath(t *testing.T) {
	if _, err := file.NewJSONL("", "run-1"); err == nil {
		t.Fatal("NewJSONL with an empty path succeeded")
	}
}

// firstDiff describes where two outputs start to differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + clip(gl) + "\nwant: " + clip(wl)
		}
	}
	return "(same lines)"
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// The output is the window and nothing else: an empty window publishes an
// empty file over what another run published there, and a file replay did
// not write is refused (sinks.ErrRefused) unless overwrite says so.
func TestFileOutputIsTheWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	sinktest.WriteAll(t, newFile(t, path, "run-1"), sinktest.Window(6, 2), 1, 10)
	finishFile(t, newFile(t, path, "run-1"))
	if len(readFile(t, path)) == 0 {
		t.Fatal("run-1 published nothing")
	}
	// Another run (another window) with no records: an empty file.
	finishFile(t, newFile(t, path, "run-empty"))
	if got := readFile(t, path); len(got) != 0 {
		t.Errorf("an empty window left %d bytes of another run's output", len(got))
	}

	// A file replay did not write.
	foreign := filepath.Join(dir, "mine.jsonl")
	if err := os.WriteFile(foreign, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := file.New(file.Config{Path: foreign, RunID: "run-1"})
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "overwrite: true") {
		t.Fatalf("New over a foreign file: %v, want sinks.ErrRefused naming overwrite: true", err)
	}
	if got := string(readFile(t, foreign)); got != "my notes\n" {
		t.Fatalf("the refusal changed the file: %q", got)
	}
	// A file replay published, then changed by hand.
	if err := os.WriteFile(path, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(file.Config{Path: path, RunID: "run-1"}); !errors.Is(err, sinks.ErrRefused) {
		t.Fatalf("New over an edited output: %v, want sinks.ErrRefused", err)
	}
	s := newFileSink(t, file.Config{Path: foreign, RunID: "run-1", Overwrite: true})
	finishFile(t, s)
	if got := readFile(t, foreign); len(got) != 0 {
		t.Errorf("overwrite: true with an empty window left %q", got)
	}
	// Per partition: an empty window publishes an empty file per partition.
	pattern := filepath.Join(dir, "pp", "o-{partition}.jsonl")
	finishFile(t, newFileSink(t, file.Config{Path: pattern, RunID: "r", PerPartition: true, Partitions: []int32{0, 2}}))
	for _, p := range []string{"o-0.jsonl", "o-2.jsonl"} {
		if st, err := os.Stat(filepath.Join(dir, "pp", p)); err != nil || st.Size() != 0 {
			t.Errorf("%s: %v, want an empty file", p, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pp", "o-7.jsonl"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(file.Config{Path: pattern, RunID: "r2", PerPartition: true}); !errors.Is(err, sinks.ErrRefused) {
		t.Errorf("New over a foreign partition file: %v, want sinks.ErrRefused", err)
	}
	// A path that names the partition twice (a directory and a file each).
	twice := filepath.Join(dir, "p-{partition}", "o-{partition}.jsonl")
	if err := os.MkdirAll(filepath.Join(dir, "p-12"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p-12", "o-12.jsonl"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(file.Config{Path: twice, RunID: "r3", PerPartition: true}); !errors.Is(err, sinks.ErrRefused) {
		t.Errorf("New over a foreign partition file of a path naming the partition twice: %v, want sinks.ErrRefused", err)
	}
}
