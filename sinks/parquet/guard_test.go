package parquet_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/parquet"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// A second sink on a staging directory fails at once while the first
// holds it (flock: another process, or another sink of this one), whoever
// opens it: the same plan again, or another plan with the same staging.
// It leaves the first's staging alone; Close releases the lock and
// removes the lock file.
func TestStagingLock(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", MaxRowsPerFile: 100, RunID: "r1", Fingerprint: "f",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	first, err := parquet.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	sinktest.MustWrite(t, first, sinktest.Rec(0, 0, "k", "v0"), sinktest.Rec(0, 1, "k", "v1"))
	if err := first.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dir, ".replay-staging")
	lock := filepath.Join(staging, "@lock")
	host, _ := os.Hostname()
	other := cfg
	other.Path, other.StagingDir, other.RunID, other.Fingerprint = t.TempDir(), staging, "r2", "g" // another plan, the same staging
	for _, c := range []parquet.Config{cfg, other} {
		_, err := parquet.New(t.Context(), c)
		if err == nil {
			t.Fatal("a second sink on a locked staging directory opened")
		}
		for _, want := range []string{"parquet sink: another replay process (host " + host + ", pid " + strconv.Itoa(os.Getpid()) + ", since ",
			"holds the staging directory " + staging + " (lock " + lock + ")",
			"wait for the other run to finish or stop it, or give each plan its own path (or url), and so its own staging directory"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("second sink: %v\nwant it to say %q", err, want)
			}
		}
	}
	// The first sink's staging is whole: its records are published.
	if err := first.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, dir); len(got) != 2 || string(got[1].Value) != "v1" {
		t.Fatalf("published %d records, want the 2 staged", len(got))
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Errorf("staging directory after Finish: %v", err)
	}
	first.Close()
	// Finish released the lock; Close without Finish releases it too, and
	// removes its file.
	again, err := parquet.New(t.Context(), other)
	if err != nil {
		t.Fatalf("after Finish: %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("no lock file while a sink holds the lock: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("lock file after Close: %v", err)
	}
	last, err := parquet.New(t.Context(), other)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	last.Close()
}

// A staging directory of another run is discarded by the sink that
// locked it, which keeps its lock: a third sink still fails.
func TestStagingLockSurvivesDiscard(t *testing.T) {
	dir := t.TempDir()
	cfg := parquet.Config{Path: dir, Topic: "orders", RunID: "r1", Fingerprint: "f", Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	s := open(t, cfg)
	sinktest.MustWrite(t, s, sinktest.Rec(0, 0, "k", "v"))
	if err := s.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg.RunID = "r2" // another run: r1's staging goes
	open(t, cfg)
	if _, err := parquet.New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "holds the staging directory") {
		t.Fatalf("a sink on staging another sink discarded and holds: %v", err)
	}
}
