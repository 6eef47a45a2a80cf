package worker

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks"
)

// fakeSyncer records the calls of a sink that batches durability; its
// position is the number of successful syncs, and fail makes the next sync
// fail.
type fakeSyncer struct {
	name  string
	calls *[]string
	syncs int64
	fail  bool
}

func (f *fakeSyncer) Sync(_ context.Context, _ int32) error {
	*f.calls = append(*f.calls, "sync "+f.name)
	if f.fail {
		f.fail = false
		return errors.New("fsync: input/output error")
	}
	f.syncs++
	return nil
}

func (f *fakeSyncer) SyncedPosition(int32) int64 { return f.syncs * 10 }

type fakeCommit struct {
	next, pos, deadPos int64
}

// newTestCommitter returns a committer over a fake sink (and dead-letter
// sink when dead) whose commits are recorded in order with the syncs.
func newTestCommitter(dead bool) (*committer, *fakeSyncer, *fakeSyncer, *[]string, *[]fakeCommit) {
	calls, commits := &[]string{}, &[]fakeCommit{}
	s := &fakeSyncer{name: "sink", calls: calls}
	d := &fakeSyncer{name: "dead", calls: calls}
	c := &committer{topic: "orders", partition: 3, sinkName: "sink file", timeout: time.Second, committed: &atomic.Int64{}, written: &atomic.Int64{},
		sink: sinks.Capabilities{Syncer: s, Positioner: s},
		commit: func(_ context.Context, next, pos, deadPos int64) error {
			*calls = append(*calls, "commit")
			*commits = append(*commits, fakeCommit{next, pos, deadPos})
			return nil
		}}
	if dead {
		c.dead = sinks.Capabilities{Syncer: d, Positioner: d}
	}
	return c, s, d, calls, commits
}

func TestCommitterCommitFollowsSync(t *testing.T) {
	c, _, _, calls, commits := newTestCommitter(false)
	c.Wrote(5)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sync sink", "commit"}; !slices.Equal(*calls, want) {
		t.Fatalf("calls %v, want %v", *calls, want)
	}
	if got := (*commits)[0]; got.next != 5 || c.Committed() != 5 {
		t.Fatalf("committed %+v (Committed %d), want next 5", got, c.Committed())
	}
	// Nothing new written: no sync, no commit.
	if err := c.Commit(); err != nil || len(*calls) != 2 {
		t.Fatalf("an empty commit synced or committed: %v %v", *calls, err)
	}
}

// A failed sync means the writes since the last commit may be lost:
// neither that commit nor a later deferred one may pass them, though the
// next sync succeeds.
func TestCommitterFailedSyncForbidsCommit(t *testing.T) {
	c, s, _, _, commits := newTestCommitter(false)
	c.Wrote(5)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.Wrote(9)
	s.fail = true
	var pe *source.PartitionError
	if err := c.Commit(); !errors.As(err, &pe) || pe.Offset != 5 || pe.Partition != 3 {
		t.Fatalf("want a *source.PartitionError at offset 5, got %v", err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(*commits) != 1 || c.Committed() != 5 || c.Committable() != 5 {
		t.Fatalf("committed past a failed sync: %+v, Committed %d, Committable %d", *commits, c.Committed(), c.Committable())
	}
}

func TestCommitterDeadLettersSyncedWhenWritten(t *testing.T) {
	c, _, _, calls, _ := newTestCommitter(true)
	for _, next := range []int64{1, 2, 3} {
		c.Wrote(next)
		if next == 3 {
			c.WroteDeadLetters()
		}
		if err := c.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Once for the trace, then only after dead letters were written.
	want := []string{"sync sink", "sync dead", "commit", "sync sink", "commit", "sync sink", "sync dead", "commit"}
	if !slices.Equal(*calls, want) {
		t.Fatalf("calls %v, want %v", *calls, want)
	}
}

func TestCommitterNeverDecreases(t *testing.T) {
	c, _, _, _, commits := newTestCommitter(false)
	c.Wrote(8)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitAt(4); err != nil {
		t.Fatal(err)
	}
	wantNeverBelow(t, c, *commits, 8)
}

// wantNeverBelow fails t when any commit stored less than next (each
// test's first commit is of next: a lower one later would undo a commit
// that may have landed), or when c did not end at next.
func wantNeverBelow(t *testing.T, c *committer, commits []fakeCommit, next int64) {
	t.Helper()
	for i, cm := range commits {
		if cm.next < next {
			t.Fatalf("commit %d stored %d below a commit of %d that may have landed", i, cm.next, next)
		}
	}
	if c.Committed() != next {
		t.Fatalf("Committed %d, want %d", c.Committed(), next)
	}
}

func TestCommitterRecordsPositions(t *testing.T) {
	c, _, _, _, commits := newTestCommitter(true)
	c.Wrote(2)
	c.WroteDeadLetters()
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.Wrote(4)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []fakeCommit{{2, 10, 10}, {4, 20, 10}}
	if !slices.Equal(*commits, want) {
		t.Fatalf("commits %+v, want %+v (positions read after each sync)", *commits, want)
	}
}

func TestCommitterDue(t *testing.T) {
	c, _, _, _, _ := newTestCommitter(false)
	now := time.Now()
	c.last = now
	if c.Due(now) || !c.Due(now.Add(commitEvery)) {
		t.Fatal("a sinks.Syncer is due every commitEvery")
	}
	c.sink = sinks.Capabilities{}
	if !c.Due(now) {
		t.Fatal("a sink durable on Write is always due")
	}
	// Found in review: an exactly-once kafka sink ran a second, offsets-only
	// transaction after every batch followed by transaction markers.
	c.sink = sinks.Capabilities{Offsets: &fakeOffsets{calls: &[]string{}}}
	if c.Due(now) || !c.Due(now.Add(commitEvery)) {
		t.Fatal("a sink committing offsets in its own transactions is due every commitEvery")
	}
}

// fakeOffsets is a sink whose transactions commit the group's offsets
// (sinks.OffsetCommitter): it records what the runner asks it to commit.
type fakeOffsets struct {
	calls *[]string
	next  []int64
}

func (f *fakeOffsets) CommitOffset(_ context.Context, p int32, next int64) error {
	*f.calls = append(*f.calls, "sink commit")
	f.next = append(f.next, next)
	return nil
}

// A sink whose transactions commit the group's offsets on the cluster the
// runner commits to is the group's only committer: the runner's own
// commit, which a stalled process could make late, after another process
// committed further, is never made; the state still moves.
func TestCommitterLeavesTheCommitToASinkThatCommitsOffsets(t *testing.T) {
	c, _, _, calls, commits := newTestCommitter(false)
	oc := &fakeOffsets{calls: calls}
	c.sink.Offsets = oc
	c.Wrote(5)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.Wrote(9)
	if err := c.CommitAt(9); err != nil {
		t.Fatal(err)
	}
	if len(*commits) != 0 || !slices.Equal(oc.next, []int64{5, 9}) || c.Committed() != 9 {
		t.Fatalf("runner commits %v, sink commits %v, Committed %d: want the sink's 5 and 9 only, Committed 9", *commits, oc.next, c.Committed())
	}
	if want := []string{"sync sink", "sink commit", "sync sink", "sink commit"}; !slices.Equal(*calls, want) {
		t.Fatalf("calls %v, want %v", *calls, want)
	}
}

// Found in review: a commit that failed after its sync (a timeout whose
// outcome is unknown: it may have landed) was followed by the worker's
// deferred Commit of a lower offset, which could move the group back.
func TestCommitterFailedCommitNotFollowedByALowerOne(t *testing.T) {
	c, _, _, _, commits := newTestCommitter(false)
	inner := c.commit
	fail := true
	c.commit = func(ctx context.Context, next, pos, deadPos int64) error {
		_ = inner(ctx, next, pos, deadPos) // recorded: it may have landed
		if fail {
			return errors.New("request timed out")
		}
		return nil
	}
	c.Wrote(5)
	if err := c.CommitAt(9); err == nil {
		t.Fatal("CommitAt: want the commit's error")
	}
	fail = false
	if err := c.Commit(); err != nil { // the worker's deferred commit
		t.Fatal(err)
	}
	for i, cm := range *commits {
		if cm.next < 9 {
			t.Fatalf("commit %d stored %d after a commit of 9 that may have landed", i, cm.next)
		}
	}
}

// A sink durable on Write commits behind the worker: CommitBehind returns
// while its commit is in flight, a second one meanwhile sends nothing, and
// Commit waits for the answer before it commits what was written since.
// The commits never decrease and each follows its write.
func TestCommitterCommitBehind(t *testing.T) {
	c, _, _, _, commits := newTestCommitter(false)
	c.sink = sinks.Capabilities{}
	if !c.CommitsBehind() {
		t.Fatal("a sink durable on Write commits behind")
	}
	inner := c.commit
	release := make(chan struct{})
	sent := make(chan int64, 10)
	c.commit = func(ctx context.Context, next, pos, deadPos int64) error {
		sent <- next
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			return errors.New("never released")
		}
		return inner(ctx, next, pos, deadPos)
	}
	c.Wrote(5)
	if err := c.CommitBehind(); err != nil { // returns with the commit blocked
		t.Fatal(err)
	}
	if got := <-sent; got != 5 {
		t.Fatalf("sent %d, want 5", got)
	}
	c.Wrote(9)
	if err := c.CommitBehind(); err != nil {
		t.Fatal(err)
	}
	if c.Committed() != 0 {
		t.Fatalf("Committed %d with the first commit unanswered, want 0", c.Committed())
	}
	select { // a second commit would be sent from its own goroutine: give it time
	case n := <-sent:
		t.Fatalf("commit of %d sent while the first was unanswered", n)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if want := []fakeCommit{{5, 0, 0}, {9, 0, 0}}; !slices.Equal(*commits, want) || c.Committed() != 9 {
		t.Fatalf("commits %+v (Committed %d), want %+v", *commits, c.Committed(), want)
	}
	for _, caps := range []sinks.Capabilities{{Syncer: &fakeSyncer{calls: &[]string{}}}, {Offsets: &fakeOffsets{calls: &[]string{}}}} {
		c.sink = caps
		if c.CommitsBehind() {
			t.Fatalf("%+v commits behind: its syncs and transactions run on the sink with its Writes", caps)
		}
	}
}

// A commit behind that failed is returned by the next call, and no commit
// after it stores less than it did (it may have landed).
func TestCommitterCommitBehindFailure(t *testing.T) {
	c, _, _, _, commits := newTestCommitter(false)
	c.sink = sinks.Capabilities{}
	inner := c.commit
	fail := true
	c.commit = func(ctx context.Context, next, pos, deadPos int64) error {
		_ = inner(ctx, next, pos, deadPos)
		if fail {
			return errors.New("request timed out")
		}
		return nil
	}
	c.Wrote(9)
	if err := c.CommitBehind(); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitAt(7); err == nil { // waits for the answer of 9
		t.Fatal("CommitAt after a failed commit behind: want its error")
	}
	fail = false
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	wantNeverBelow(t, c, *commits, 9)
}

// A sinks.Syncer's records count as written once a sync made them
// durable: those of a failed sync, which a resume delivers again, do not.
func TestCommitterCountsSyncedRecords(t *testing.T) {
	c, s, _, _, _ := newTestCommitter(false)
	c.WroteRecords(5)
	c.Wrote(5)
	if got := c.written.Load(); got != 0 {
		t.Fatalf("written %d before the sync, want 0", got)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	c.WroteRecords(3)
	c.Wrote(8)
	s.fail = true
	if err := c.Commit(); err == nil {
		t.Fatal("a commit after a failed sync succeeded")
	}
	if got := c.written.Load(); got != 5 {
		t.Fatalf("written %d after a failed sync, want the 5 synced before", got)
	}
}
