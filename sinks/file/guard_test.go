package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// points is a resumed run over partitions 0 and 1, ranges [10, 20): p0
// committed at c0, p1 at c1.
func points(c0, c1 int64) []sinks.ResumePoint {
	return []sinks.ResumePoint{{Partition: 0, Start: 10, Committed: c0, End: 20}, {Partition: 1, Start: 10, Committed: c1, End: 20}}
}

func wantResumeError(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("CheckResume = nil, want an error containing %q", subs)
	}
	var re *file.ResumeError
	if !errors.As(err, &re) {
		t.Errorf("CheckResume error is a %T, want a *file.ResumeError: %v", err, err)
	}
	for _, s := range append(subs, "working directory of the first run", "replay the window again from its start") {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("CheckResume error lacks %q:\n%v", s, err)
		}
	}
	// The library names no flag of the command line: the caller words the
	// restart.
	if strings.Contains(err.Error(), "--") {
		t.Errorf("CheckResume error names a flag:\n%v", err)
	}
}

// CheckResume accepts a resume only when the records of every partition
// replayed past its start are in this run's staging, or, once every
// partition finished, in the published output.
func TestFileCheckResume(t *testing.T) {
	window := sinktest.Window(31, 2)
	// staged returns a path whose staging holds partition 0's records (a
	// run interrupted after committing partition 0 past its start).
	staged := func(t *testing.T, runID string) string {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		f := newFile(t, path, runID)
		if err := f.Write(t.Context(), window[0][:3]); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		return path
	}

	t.Run("own staging", func(t *testing.T) {
		path := staged(t, "run-1")
		if err := newFile(t, path, "run-1").CheckResume(points(15, 10)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nothing committed past the starts", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		if err := newFile(t, path, "run-1").CheckResume(points(10, 10)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("staging deleted", func(t *testing.T) {
		path := staged(t, "run-1")
		if err := os.RemoveAll(path + ".parts"); err != nil {
			t.Fatal(err)
		}
		f := newFile(t, path, "run-1")
		wantResumeError(t, f.CheckResume(points(15, 10)), "partition 0", "offset 15", path+".parts does not exist")
		if _, err := os.Stat(path + ".parts"); !os.IsNotExist(err) {
			t.Errorf("CheckResume created staging: %v", err)
		}
	})
	t.Run("a partition's staging file deleted", func(t *testing.T) {
		path := staged(t, "run-1")
		// Partition 1 committed past its start too, but its file is gone.
		wantResumeError(t, newFile(t, path, "run-1").CheckResume(points(15, 12)), "partition 1",
			filepath.Join(path+".parts", "partition-1.jsonl")+" is missing")
	})
	t.Run("staging replaced by another run", func(t *testing.T) {
		path := staged(t, "run-1")
		other := newFile(t, path, "run-2")
		if err := other.Write(t.Context(), window[1][:2]); err != nil {
			t.Fatal(err)
		}
		wantResumeError(t, newFile(t, path, "run-1").CheckResume(points(15, 10)), "belongs to another run")
	})
	t.Run("finished and published", func(t *testing.T) {
		path := staged(t, "run-1")
		f := newFile(t, path, "run-1")
		finishFile(t, f)
		if err := newFile(t, path, "run-1").CheckResume(points(20, 20)); err != nil {
			t.Fatalf("a finished run with its output published: %v", err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		wantResumeError(t, newFile(t, path, "run-1").CheckResume(points(20, 20)), "neither its published output "+path)
	})
	// A stale output of an earlier run does not stand for a run that has
	// not finished: Finish publishes only when every partition is done.
	t.Run("not finished, staging deleted, an old output", func(t *testing.T) {
		path := staged(t, "run-1")
		if err := os.RemoveAll(path + ".parts"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := newFileSink(t, file.Config{Path: path, RunID: "run-1", Overwrite: true})
		wantResumeError(t, f.CheckResume(points(20, 10)), "does not exist")
	})
	t.Run("per_partition finished", func(t *testing.T) {
		dir := t.TempDir()
		pattern := filepath.Join(dir, "out-{partition}.jsonl")
		f := newFileSink(t, file.Config{Path: pattern, RunID: "run-1", PerPartition: true})
		for p := range window {
			if err := f.Write(t.Context(), window[p][:2]); err != nil {
				t.Fatal(err)
			}
		}
		finishFile(t, f)
		reopen := func() *file.Sink {
			return newFileSink(t, file.Config{Path: pattern, RunID: "run-1", PerPartition: true})
		}
		if err := reopen().CheckResume(points(20, 20)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "out-1.jsonl")); err != nil {
			t.Fatal(err)
		}
		wantResumeError(t, reopen().CheckResume(points(20, 20)), "partition 1", filepath.Join(dir, "out-1.jsonl"))
	})
}

// Sync leaves a staging file for a partition nothing was written to (all
// its records filtered out), so that a resume tells it from lost staging.
func TestFileSyncCreatesStagingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	cfg := file.Config{Path: path, RunID: "run-1", Format: "csv", Columns: plan.Columns{{Name: "offset", Field: "offset"}}}
	f := newFileSink(t, cfg)
	if err := f.Sync(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(path+".parts", "partition-3.jsonl"))
	if err != nil || st.Size() != 0 {
		t.Fatalf("staging file after Sync: %v, %v; want an empty file", st, err)
	}
	resumed := newFileSink(t, cfg)
	if err := resumed.CheckResume([]sinks.ResumePoint{{Partition: 3, Start: 0, Committed: 7, End: 9}}); err != nil {
		t.Fatal(err)
	}
	finishFile(t, resumed)
	if got := string(readFile(t, path)); got != "offset\n" {
		t.Errorf("output %q, want the header row", got)
	}
}

// The dead-letter sinks check the wrapped sink's staging too.
func TestDeadLetterSinkCheckResume(t *testing.T) {
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dead."+format)
			section := &file.Section{Path: path, Format: format}
			cfg := plan.Sink{Type: "file", Config: section}
			if format == "csv" {
				section.Columns = plan.Columns{{Name: "offset", Field: "offset"}}
			}
			s, err := registry.NewDeadLetter(t.Context(), cfg, sinks.Options{RunID: "r"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := s.Capabilities().Resumer
			if r == nil {
				t.Fatalf("the %s dead-letter sink is not a Resumer", format)
			}
			wantResumeError(t, r.CheckResume(points(12, 10)), path+".parts does not exist")
		})
	}
}

// A second file sink on an output fails at once while the first holds it
// (flock: another process, or another sink of this one); Close releases it
// and removes the lock file.
func TestFileLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	first, err := file.NewJSONL(path, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	lock := filepath.Join(dir, ".out.jsonl.lock")
	_, err = file.NewJSONL(path, "run-1")
	host, _ := os.Hostname()
	want := "another replay process is writing " + path + " (lock " + lock + " held by host " + host + ", pid " + strconv.Itoa(os.Getpid()) + ", since "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "); wait for it or stop it") {
		t.Fatalf("second sink on the same output: %v, want %q", err, want)
	}
	// The second sink touched nothing: no staging.
	if _, err := os.Stat(path + ".parts"); !os.IsNotExist(err) {
		t.Errorf("staging after a refused second sink: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("lock file left after Close: %v", err)
	}
	again, err := file.NewJSONL(path, "run-1")
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()
	// Another output in the same directory is another lock.
	a, err := file.NewJSONL(path, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := file.NewJSONL(filepath.Join(dir, "other.jsonl"), "run-1")
	if err != nil {
		t.Fatalf("another output of the same directory: %v", err)
	}
	b.Close()
}

// A path that cannot be published is refused by New, before
// anything is written (it failed at publish, after the whole run).
func TestFileRejectsUnpublishablePath(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"adir", "pp/7", "pp2/3/x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pp2", "4"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		path         string
		perPartition bool
		want         string
	}{
		{"an existing directory", filepath.Join(dir, "adir"), false, filepath.Join(dir, "adir") + " is a directory"},
		{"ending in a slash", filepath.Join(dir, "new") + "/", false, `ends in "/"`},
		{"a file in the way of its directory", filepath.Join(blocker, "out.jsonl"), false, blocker + " is not a directory"},
		{"per_partition: a partition's file is a directory", filepath.Join(dir, "pp", "{partition}"), true, filepath.Join(dir, "pp", "7") + ", a partition's output file, is a directory"},
		{"per_partition: a file in the way of a partition's directory", filepath.Join(dir, "pp2", "{partition}", "out.jsonl"), true, filepath.Join(dir, "pp2", "4") + " is not a directory"},
		{"per_partition: ending in a slash", filepath.Join(dir, "x-{partition}") + "/", true, `ends in "/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := file.New(file.Config{Path: tc.path, RunID: "r", PerPartition: tc.perPartition})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("file.New(%q) = %v, want an error containing %q", tc.path, err, tc.want)
			}
		})
	}
	// Paths the checks must not take for a directory: a pattern whose
	// directory holds other names, an output that exists as a file.
	for _, tc := range []struct {
		path         string
		perPartition bool
	}{{filepath.Join(dir, "pp", "out-{partition}.jsonl"), true}, {blocker, false}, {filepath.Join(dir, "pp2", "3", "x", "{partition}.jsonl"), true}} {
		s, err := file.New(file.Config{Path: tc.path, RunID: "r", PerPartition: tc.perPartition, Overwrite: true})
		if err != nil {
			t.Errorf("file.New(%q): %v", tc.path, err)
			continue
		}
		if err := s.Finish(context.Background()); err != nil {
			t.Errorf("Finish %q: %v", tc.path, err)
		}
		s.Close()
	}
}

// Staging emptied or truncated below what was durable at the last commit
// (sinks.Positioner) is refused: the records below the commit are not read
// again, so resuming would publish an output without them. A tail beyond
// the durable position (written, not committed) may be cut, as a crash
// does.
func TestFileCheckResumeTruncatedStaging(t *testing.T) {
	window := sinktest.Window(34, 2)
	for _, tc := range []struct {
		name    string
		cfg     func(path string) file.Config
		staging func(path string) string
	}{
		{"interleaved", func(path string) file.Config {
			return file.Config{Path: path, RunID: "run-1", Interleave: true}
		},
			func(path string) string { return filepath.Join(path+".parts", "records.jsonl") }},
		{"partition order", func(path string) file.Config { return file.Config{Path: path, RunID: "run-1"} },
			func(path string) string { return filepath.Join(path+".parts", "partition-0.jsonl") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cut := range []struct {
				name   string
				size   func(durable, all int64) int64
				refuse bool
			}{
				{"emptied", func(durable, all int64) int64 { return 0 }, true},
				{"truncated below the commit", func(durable, all int64) int64 { return durable - 1 }, true},
				{"uncommitted tail cut", func(durable, all int64) int64 { return durable }, false},
			} {
				t.Run(cut.name, func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "out.jsonl")
					f := newFileSink(t, tc.cfg(path))
					if err := f.Write(t.Context(), window[0][:5]); err != nil {
						t.Fatal(err)
					}
					if err := f.Sync(t.Context(), 0); err != nil {
						t.Fatal(err)
					}
					durable := f.SyncedPosition(0)
					if err := f.Write(t.Context(), window[0][5:8]); err != nil { // written, not committed
						t.Fatal(err)
					}
					st, err := os.Stat(tc.staging(path))
					if err != nil {
						t.Fatal(err)
					}
					if durable <= 0 || durable >= st.Size() {
						t.Fatalf("durable position %d, staging %d bytes: want 0 < durable < size", durable, st.Size())
					}
					f.Close()
					if err := os.Truncate(tc.staging(path), cut.size(durable, st.Size())); err != nil {
						t.Fatal(err)
					}
					committed := window[0][5].Offset
					pts := []sinks.ResumePoint{{Partition: 0, Start: window[0][0].Offset, Committed: committed, End: committed + 100, Position: durable}}
					err = newFileSink(t, tc.cfg(path)).CheckResume(pts)
					if !cut.refuse {
						if err != nil {
							t.Fatal(err)
						}
						return
					}
					wantResumeError(t, err, "partition 0", "truncated or emptied", strconv.FormatInt(durable, 10)+" bytes")
				})
			}
		})
	}
}
