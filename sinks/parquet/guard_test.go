package parquet_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// A run of another identity (a restart, a window resolved afresh) over
// the output of an earlier run of the plan is refused, whether that run
// finished (its manifest and objects) or not (objects only), and in
// whichever partitions and ranges: its objects and manifest would be
// mixed with the earlier run's. Nothing changes. Once the earlier run's
// objects and manifest are deleted, the run starts.
func TestEarlierRunRefused(t *testing.T) {
	dir := t.TempDir()
	earlier := parquet.Config{Path: dir, Topic: "orders", MaxRowsPerFile: 2, RunID: "r1", Fingerprint: "f",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}}}
	s := open(t, earlier)
	for off := range int64(10) {
		sinktest.MustWrite(t, s, sinktest.Rec(0, off, "k", "v"))
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before := snapshot(t, dir)
	first := filepath.Join(dir, "orders", "0", "00000000000000000000-00000000000000000002.parquet")
	for _, rs := range [][]sinks.Range{
		{{Partition: 0, Start: 10, End: 20}}, // the window grew
		{{Partition: 1, Start: 0, End: 10}},  // another partition
	} {
		later := earlier
		later.RunID, later.Ranges = "r2", rs
		_, err := parquet.New(t.Context(), later)
		if !errors.Is(err, sinks.ErrRefused) {
			t.Fatalf("ranges %v over an earlier run's output: %v, want a refusal", rs, err)
		}
		for _, want := range []string{dir + " holds 5 objects that are not this run's, the first " + first + ": an earlier run of this plan wrote it (run r1)",
			"and the manifest " + filepath.Join(dir, parquet.ManifestName) + " of an earlier run of this plan (run r1, 5 objects)",
			"This run (run r2: another resolution of the window, or another plan)",
			"write to a new path (or url prefix), or delete the earlier run's objects and manifest, then run again"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q\nwant it to say %q", err, want)
			}
		}
	}
	if after := snapshot(t, dir); len(after) != len(before) {
		t.Fatalf("a refused run changed the output: %d files, was %d", len(after), len(before))
	}
	later := earlier
	later.RunID, later.Ranges = "r2", []sinks.Range{{Partition: 0, Start: 10, End: 20}}
	// The manifest alone.
	if err := os.RemoveAll(filepath.Join(dir, "orders")); err != nil {
		t.Fatal(err)
	}
	_, err := parquet.New(t.Context(), later)
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "holds the manifest "+filepath.Join(dir, parquet.ManifestName)+" of an earlier run of this plan (run r1, 5 objects)") {
		t.Fatalf("over an earlier run's manifest: %v, want a refusal naming it", err)
	}
	if err := os.Remove(filepath.Join(dir, parquet.ManifestName)); err != nil {
		t.Fatal(err)
	}
	open(t, later).Close()

	// An earlier run that did not finish: objects, no manifest.
	dir = t.TempDir()
	earlier.Path = dir
	s = open(t, earlier)
	for off := range int64(5) {
		sinktest.MustWrite(t, s, sinktest.Rec(0, off, "k", "v"))
	}
	s.Close()
	later.Path = dir
	_, err = parquet.New(t.Context(), later)
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), dir+" holds 2 objects that are not this run's") || strings.Contains(err.Error(), "manifest "+dir) {
		t.Fatalf("over an unfinished earlier run's objects: %v, want a refusal naming them", err)
	}
}

// A restart of the same run (the same plan and resolved ranges, so the
// same run identity) over its own output, finished or not, is no earlier
// run: objects are named from the ranges and built the same, byte for
// byte, so the restarted run ends with the output a single clean run
// writes.
func TestRestartSameRunSameBytes(t *testing.T) {
	cfg := parquet.Config{Topic: "orders", MaxRowsPerFile: 3, RunID: "r1", Fingerprint: "f",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 10}, {Partition: 1, Start: 0, End: 10}}}
	write := func(s *parquet.Sink, upTo int64) {
		for off := range upTo {
			for p := range int32(2) {
				sinktest.MustWrite(t, s, sinktest.Rec(p, off, "k"+strconv.Itoa(int(off)), `{"n":`+strconv.Itoa(int(off))+`}`))
			}
		}
	}
	clean := cfg
	clean.Path = t.TempDir()
	s := open(t, clean)
	write(s, 10)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := relSnapshot(t, clean.Path)
	for _, upTo := range []int64{7, 10} { // an unfinished run, a finished one
		restarted := cfg
		restarted.Path = t.TempDir()
		s := open(t, restarted)
		write(s, upTo)
		if upTo == 10 {
			if err := s.Finish(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		again := open(t, restarted) // the restart writes the window from its start
		write(again, 10)
		if err := again.Finish(t.Context()); err != nil {
			t.Fatalf("restart after %d records: %v", upTo, err)
		}
		if got := relSnapshot(t, restarted.Path); !maps.Equal(got, want) {
			t.Errorf("restart after %d records: the output differs from a clean run's: files %v, want %v", upTo, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
}

// relSnapshot is snapshot with paths relative to dir.
func relSnapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	for p, b := range snapshot(t, dir) {
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
	}
	return out
}

// A re-run keeps the objects already there: one whose bytes changed since
// the run's manifest listed it is refused, and the manifest is left as it
// is, instead of being rewritten with the changed object's sha256.
func TestChangedObjectRefused(t *testing.T) {
	cfg := parquet.Config{Path: t.TempDir(), Topic: "orders", MaxRowsPerFile: 3, RunID: "r1", Fingerprint: "f",
		Ranges: []sinks.Range{{Partition: 0, Start: 0, End: 6}}}
	write := func(s *parquet.Sink) {
		for off := range int64(6) {
			sinktest.MustWrite(t, s, sinktest.Rec(0, off, "k", `{"n":`+strconv.Itoa(int(off))+`}`))
		}
	}
	s := open(t, cfg)
	write(s)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(cfg.Path, parquet.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(cfg.Path, objects(t, cfg.Path)[0])
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff // a data page's byte: the footer still reads
	if err := os.WriteFile(first, b, 0o644); err != nil {
		t.Fatal(err)
	}
	again := open(t, cfg)
	write(again)
	err = again.Finish(t.Context())
	if !errors.Is(err, sinks.ErrRefused) || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("Finish over a changed object: %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(filepath.Join(cfg.Path, parquet.ManifestName)); !bytes.Equal(got, manifest) {
		t.Errorf("the manifest was rewritten:\n%s\nwant\n%s", got, manifest)
	}
}
