package file_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
)

// A refused resume is a *file.ResumeError naming the first partition
// missing records, so that a caller can word its own remedy.
func TestFileCheckResumeTypedError(t *testing.T) {
	dir := t.TempDir()
	s := newFileSink(t, file.Config{Path: filepath.Join(dir, "out.jsonl"), RunID: "r"})
	err := s.CheckResume([]sinks.ResumePoint{
		{Partition: 2, Start: 10, Committed: 15, End: 20},
		{Partition: 3, Start: 10, Committed: 12, End: 20},
	})
	var re *file.ResumeError
	if !errors.As(err, &re) {
		t.Fatalf("want a *file.ResumeError, got %v", err)
	}
	want := file.ResumeError{Partition: 2, Committed: 15, Start: 10, End: 20, More: 1, Restore: filepath.Join(dir, "out.jsonl.parts"),
		Missing: "the staging directory " + filepath.Join(dir, "out.jsonl.parts") + " does not exist"}
	if *re != want {
		t.Fatalf("got %+v, want %+v", *re, want)
	}
}
