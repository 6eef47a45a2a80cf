package sqlite_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// Test helpers shared by this package's tests.

func rec(partition int32, offset int64, key, value string) record.Record {
	r := record.Record{Topic: "orders", Partition: partition, Offset: offset,
		Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(offset) * time.Millisecond)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func mustWrite(t *testing.T, s sinks.Sink, batch ...record.Record) {
	t.Helper()
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}

// writeAll writes each partition of window in batches of up to max records.
func writeAll(t *testing.T, s sinks.Sink, window [][]record.Record, seed uint64, max int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, part := range window {
		for _, b := range sinktest.Batches(rng, part, max) {
			if err := s.Write(t.Context(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

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
