package stdout_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/replay-tool/replay/sinks/sinktest"
)

// Test helpers shared by this package's tests.

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
