package runner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
)

// fsyncgate is a file sink whose first Sync fails and later ones succeed,
// as fsync does on Linux once a writeback error was reported: the pages
// are marked clean, and the next fsync returns nil though the data is gone.
type fsyncgate struct {
	*file.Sink
	syncs atomic.Int64
}

func (s *fsyncgate) Sync(ctx context.Context, partition int32) error {
	if s.syncs.Add(1) == 1 {
		return errors.New("fsync: input/output error")
	}
	return s.Sink.Sync(ctx, partition)
}

func (s *fsyncgate) Capabilities() sinks.Capabilities {
	c := s.Sink.Capabilities()
	c.Syncer = s
	return c
}

// A failed Sync means the records written since the last commit may be
// gone: nothing may be committed past them afterwards, nor counted as
// written. Regression: the
// run's deferred commit synced again (which succeeded) and committed.
func TestNoCommitAfterFailedSync(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 50, t0, time.Hour)
	p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}}")
	c := connect(t, p)
	job, err := Prepare(context.Background(), c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewJSONL(out, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	sink := &fsyncgate{Sink: fs}
	rep, err := job.Run(context.Background(), sink)
	if err == nil {
		t.Fatalf("want the sync failure, got %v", err)
	}
	for _, pr := range rep.Partitions {
		if pr.Written != 0 {
			t.Errorf("partition %d: the report counts %d records written, none of which a sync made durable", pr.Partition, pr.Written)
		}
	}
	for part, cp := range commits(t, c, p.Group, "orders", 0) {
		if cp.Offset != cp.Start {
			t.Errorf("partition %d: committed %d past a failed sync (start %d)", part, cp.Offset, cp.Start)
		}
	}
}
