package sinktest

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Durability says when a sink's written records are durable.
type Durability string

const (
	// OnWrite: every Write that returned nil is durable (a database
	// commit, a broker acknowledgement, a printed line).
	OnWrite Durability = "on write"
	// OnSync: written records are durable once Sync for their partition
	// returned nil (the sink declares a Syncer).
	OnSync Durability = "on sync"
)

// Features declares what a sink under test offers; RunWith runs the
// subtests of each declared feature, and checks that the sink's
// Capabilities agree with the declaration.
type Features struct {
	// Durable is when written records are durable; "" skips SyncThenCrash.
	Durable Durability
	// Duplicates is set for a sink that writes a re-delivered record again
	// (stdout cannot take back what it printed): the tests that re-deliver
	// compare the distinct records stored, every other test the records
	// as stored, so a record stored twice without a re-delivery fails.
	Duplicates bool
	// Resumes is set for a Resumer. LoseOutput then removes or truncates
	// the output t's target holds (the sink is closed), as a lost staging
	// directory or a database created afresh would: CheckResume of a sink
	// reopened on it must refuse a resume past the start.
	Resumes    bool
	LoseOutput func(t *testing.T)
	// Positions is set for a Positioner: SyncedPosition never decreases
	// across Writes and Syncs.
	Positions bool
	// CheckpointGroup is the group the harness's sinks record checkpoints
	// for (a checkpoint table configured); "" for a sink without one.
	CheckpointGroup string
	// Contents is set for a sink whose harness is a ContentsHarness: the
	// Contents group writes Corpus and reads every byte back. Unset, the
	// sink does not yet promise to keep arbitrary bytes (postgres and
	// sqlite today).
	Contents bool
}

// RunWith runs the conformance suite against h: the subtests every sink
// passes, and those of the features f declares.
func RunWith(t *testing.T, h Harness, f Features) {
	t.Run("Window", func(t *testing.T) { testWindow(t, h) })
	t.Run("Redelivery", func(t *testing.T) { testRedelivery(t, h, f) })
	t.Run("DuplicateKeyInBatch", func(t *testing.T) { testDuplicateKey(t, h) })
	t.Run("ConcurrentPartitions", func(t *testing.T) { testConcurrent(t, h, f) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, h, f) })
	t.Run("CrashAndResume", func(t *testing.T) { testCrashAndResume(t, h, f) })
	if f.Durable != "" {
		t.Run("SyncThenCrash", func(t *testing.T) { testSyncThenCrash(t, h, f) })
	}
	if f.Positions {
		t.Run("SyncedPositionMonotonic", func(t *testing.T) { testPositions(t, h) })
	}
	if f.Resumes {
		t.Run("ResumeRefusal", func(t *testing.T) { testResumeRefusal(t, h, f) })
	}
	if f.Contents {
		t.Run("Contents", func(t *testing.T) {
			ch, ok := h.(ContentsHarness)
			if !ok {
				t.Fatal("Features.Contents is set but the harness is no ContentsHarness")
			}
			testContents(t, ch)
		})
	}
	if f.CheckpointGroup != "" {
		t.Run("CheckpointStore", func(t *testing.T) { testCheckpoints(t, h, f.CheckpointGroup) })
	}
}

// distinct returns contents without repeated entries (sorted, as Equal
// compares them), for a sink that declares Duplicates in a test that
// re-delivers.
func distinct(f Features, contents []string) []string {
	if !f.Duplicates {
		return contents
	}
	return slices.Compact(slices.Sorted(slices.Values(contents)))
}

// crash makes what s wrote durable (Sync of every partition for a sink
// with a Syncer) and closes s without Finish.
func crash(t *testing.T, s sinks.Sink, f Features, partitions int) {
	t.Helper()
	sy := sinks.CapabilitiesOf(s).Syncer
	if f.Durable == OnSync && sy == nil {
		t.Fatal("the sink is declared durable on sync but has no Syncer")
	}
	for p := 0; sy != nil && p < partitions; p++ {
		if err := sy.Sync(t.Context(), int32(p)); err != nil {
			t.Fatalf("sync partition %d: %v", p, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close without finish: %v", err)
	}
}

// testSyncThenCrash writes the first part of each partition, makes it
// durable, and closes the sink without Finish (a crash after the commit);
// a sink reopened on the target and finished without a write must hold
// exactly those records.
func testSyncThenCrash(t *testing.T, h Harness, f Features) {
	window := windowFor(h, 40, 3)
	s := h.New(t)
	rng := rand.New(rand.NewPCG(40, 1))
	var written [][]record.Record
	for _, part := range window {
		n := 1 + rng.IntN(len(part)-1)
		for _, b := range Batches(rng, part[:n], 7) {
			write(t, s, b)
		}
		written = append(written, part[:n])
	}
	crash(t, s, f, len(window))
	reopened := open(t, h)
	finish(t, reopened)
	Equal(t, "contents after sync, crash and reopen", h.Contents(t), Want(written))
}

// testPositions checks that SyncedPosition of each partition never
// decreases across Writes (re-deliveries included) and Syncs.
func testPositions(t *testing.T, h Harness) {
	window := windowFor(h, 41, 2)
	s := open(t, h)
	c := s.Capabilities()
	if c.Positioner == nil || c.Syncer == nil {
		t.Fatal("the sink is declared a Positioner but lacks Positioner or Syncer")
	}
	rng := rand.New(rand.NewPCG(41, 1))
	last := map[int32]int64{}
	check := func(p int32, when string) {
		t.Helper()
		pos := c.Positioner.SyncedPosition(p)
		if pos < last[p] {
			t.Fatalf("partition %d: SyncedPosition %d %s, after %d", p, pos, when, last[p])
		}
		last[p] = pos
	}
	for _, part := range window {
		p := part[0].Partition
		batches := Batches(rng, part, 6)
		for i, b := range batches {
			write(t, s, b)
			check(p, "after a write")
			if i > 0 && rng.IntN(3) == 0 {
				write(t, s, batches[i-1]) // a re-delivery
				check(p, "after a re-delivery")
			}
			if rng.IntN(2) == 0 {
				if err := c.Syncer.Sync(t.Context(), p); err != nil {
					t.Fatal(err)
				}
				check(p, "after a sync")
			}
		}
		if err := c.Syncer.Sync(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		check(p, "after the last sync")
		if last[p] == 0 {
			t.Fatalf("partition %d: SyncedPosition is 0 after syncing %d records", p, len(part))
		}
	}
}

// testResumeRefusal writes and makes durable part of a window, loses the
// output (Features.LoseOutput) and checks that a reopened sink refuses to
// resume past the start, while a resume that has written nothing yet
// (Committed == Start) is accepted.
func testResumeRefusal(t *testing.T, h Harness, f Features) {
	if f.LoseOutput == nil {
		t.Fatal("the sink is declared a Resumer without Features.LoseOutput")
	}
	window := windowFor(h, 42, 2)
	s := h.New(t)
	var points []sinks.ResumePoint
	for _, part := range window {
		n := len(part) / 2
		write(t, s, part[:n])
		points = append(points, sinks.ResumePoint{Partition: part[0].Partition, Start: part[0].Offset,
			Committed: part[n].Offset, End: part[len(part)-1].Offset + 1})
	}
	crash(t, s, f, len(window))
	f.LoseOutput(t)
	reopened := open(t, h)
	r := reopened.Capabilities().Resumer
	if r == nil {
		t.Fatal("the sink is declared a Resumer but has no Resumer")
	}
	if err := r.CheckResume(points); err == nil {
		t.Fatal("CheckResume accepted a resume past the start of output that is gone")
	}
	fresh := slices.Clone(points)
	for i := range fresh {
		fresh[i].Committed = fresh[i].Start
	}
	if err := r.CheckResume(fresh); err != nil {
		t.Fatalf("CheckResume refused a resume that had written nothing: %v", err)
	}
}

// testCheckpoints checks the checkpoint store: after each Write a
// partition's checkpoint is the offset after its batch, a re-delivered
// earlier batch leaves it, and ResetCheckpoints forgets them.
func testCheckpoints(t *testing.T, h Harness, group string) {
	window := windowFor(h, 43, 2)
	s := open(t, h)
	cs := s.Capabilities().Checkpoints
	if cs == nil {
		t.Fatal("the sink is declared a checkpoint store but has none")
	}
	ctx := t.Context()
	topic := window[0][0].Topic
	read := func(what string, want map[int32]int64) {
		t.Helper()
		got, err := cs.Checkpoints(ctx, group, topic)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: checkpoints %v, want %v", what, got, want)
		}
	}
	read("before any write", nil)
	rng := rand.New(rand.NewPCG(43, 1))
	want := map[int32]int64{}
	for _, part := range window {
		batches := Batches(rng, part, 8)
		for i, b := range batches {
			write(t, s, b)
			want[b[0].Partition] = b[len(b)-1].Offset + 1
			read("after a write", want)
			if i > 0 {
				write(t, s, batches[rng.IntN(i)]) // an earlier batch again
				read("after re-delivering an earlier batch", want)
			}
		}
	}
	if err := cs.ResetCheckpoints(ctx, group, topic); err != nil {
		t.Fatal(err)
	}
	read("after ResetCheckpoints", nil)
}
