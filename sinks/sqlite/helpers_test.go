package sqlite_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// Test helpers shared by this package's tests.

func points(c0, c1 int64) []sinks.ResumePoint {
	return []sinks.ResumePoint{{Partition: 0, Start: 10, Committed: c0, End: 20}, {Partition: 1, Start: 10, Committed: c1, End: 20}}
}

func wantResumeError(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("CheckResume = nil, want an error containing %q", subs)
	}
	var re *sqlite.ResumeError
	if !errors.As(err, &re) {
		t.Errorf("CheckResume error is a %T, want a *sqlite.ResumeError: %v", err, err)
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

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
