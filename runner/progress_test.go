package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks/file"
)

// Job.Progress read while Run runs (from the sink and from another
// goroutine, under -race) only grows, and once Run returned it equals the
// report: interrupted half-way and run to the end.
func TestProgressSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		interrupt int64 // cancel at this sink write; 0: never
	}{
		{name: "interrupted", interrupt: 6},
		{name: "complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestCluster(t, 3, "orders")
			seed(t, sb, "orders", 6000, t0, time.Hour)
			p, out := filePlan(t, sb, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)))
			p.Filter = `value.status != "cancelled"` // some records skipped as filtered
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := Prepare(ctx, connect(t, p), p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			before := job.Progress()
			if !before.Started.IsZero() || before.Written != 0 || before.Replayed != 0 || before.Offsets != job.Resolution.Total() || len(before.Partitions) != 3 {
				t.Fatalf("progress before the run: %+v", before)
			}

			var mu sync.Mutex
			snaps := []Snapshot{before}
			// Snapshots are taken under the lock, so their order in snaps is
			// the order they were taken in (the sink hook and the poller race).
			takeSample := func() {
				mu.Lock()
				snaps = append(snaps, job.Progress())
				mu.Unlock()
			}
			stop, polled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(polled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						takeSample()
					}
				}
			}()
			fs, err := file.NewJSONL(out, job.RunID())
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			rep, err := job.Run(ctx, &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
				takeSample()
				if n == tc.interrupt {
					cancel()
				}
				return nil
			}})
			close(stop)
			<-polled
			if tc.interrupt != 0 && !errors.Is(err, ErrInterrupted) {
				t.Fatalf("want ErrInterrupted, got %v", err)
			}
			if tc.interrupt == 0 && err != nil {
				t.Fatal(err)
			}
			final := job.Progress()
			snaps = append(snaps, final)

			mid := 0
			for i := 1; i < len(snaps); i++ {
				if msg := shrunk(snaps[i-1], snaps[i]); msg != "" {
					t.Fatalf("snapshot %d after %d: %s\n%+v\n%+v", i, i-1, msg, snaps[i-1], snaps[i])
				}
				if snaps[i].Written > 0 && snaps[i].Written < final.Written {
					mid++
				}
			}
			if mid == 0 {
				t.Errorf("no snapshot saw the run in progress (%d snapshots)", len(snaps))
			}

			read, written, skipped := rep.Totals()
			if final.Read != read || final.Written != written || sum(final.Skipped) != skipped || final.Started != rep.Started {
				t.Errorf("final snapshot totals read %d written %d skipped %d, report %d %d %d", final.Read, final.Written, sum(final.Skipped), read, written, skipped)
			}
			if final.Skipped["filtered"] == 0 {
				t.Errorf("the filter skipped nothing: %+v", final.Skipped)
			}
			remaining := int64(0)
			for i, pr := range rep.Partitions {
				ps := final.Partitions[i]
				want := PartitionSnapshot{Partition: pr.Partition, Start: pr.Start, End: pr.End, From: pr.From, Next: pr.Next,
					Read: pr.Read, Written: pr.Written, Skipped: pr.Skipped, Done: pr.Done}
				if !equalSnapshot(ps, want) {
					t.Errorf("partition %d: snapshot %+v, report %+v", pr.Partition, ps, want)
				}
				remaining += pr.End - pr.Next
			}
			if final.Remaining != remaining || final.Done != (remaining == 0) || (tc.interrupt != 0) != (remaining > 0) {
				t.Errorf("final snapshot: remaining %d done %v, the report leaves %d", final.Remaining, final.Done, remaining)
			}
		})
	}
}

// shrunk says which counter of b is below a's, if any.
func shrunk(a, b Snapshot) string {
	switch {
	case b.Read < a.Read, b.Written < a.Written, b.Replayed < a.Replayed, sum(b.Skipped) < sum(a.Skipped), a.Done && !b.Done:
		return "a total went back"
	case len(a.Partitions) != len(b.Partitions):
		return "the partitions changed"
	case b.Remaining != b.Offsets-b.Replayed || b.Offsets != a.Offsets:
		return "the offsets do not add up"
	}
	for i, pa := range a.Partitions {
		pb := b.Partitions[i]
		if pb.Partition != pa.Partition || pb.Next < pa.Next || pb.Read < pa.Read || pb.Written < pa.Written ||
			sum(pb.Skipped) < sum(pa.Skipped) || pa.Done && !pb.Done || pb.Done && pb.Next < pb.End {
			return fmt.Sprintf("partition %d went back", pa.Partition)
		}
	}
	return ""
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

func equalSnapshot(a, b PartitionSnapshot) bool {
	return a.Partition == b.Partition && a.Start == b.Start && a.End == b.End && a.From == b.From && a.Next == b.Next &&
		a.Read == b.Read && a.Written == b.Written && maps.Equal(a.Skipped, b.Skipped) && a.Done == b.Done
}

// Without a progress display (stderr is not a terminal) the run logs its
// totals every ProgressEvery; a negative ProgressEvery logs none.
func TestProgressLogLines(t *testing.T) {
	for _, every := range []time.Duration{50 * time.Millisecond, -1} {
		name := "every " + every.String()
		if every < 0 {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			sb := newTestCluster(t, 2, "orders")
			seed(t, sb, "orders", 1000, t0, time.Hour)
			p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.test
window: {offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}}
throttle: {records_per_second: 2500}
sink: {type: file, path: %s, batch_size: 50}
`, filepath.Join(t.TempDir(), "out.jsonl")))
			var logs testenv.Buffer
			opts := Options{Log: zerolog.New(&logs), ProgressEvery: every}
			job, err := Prepare(context.Background(), connect(t, p), p, opts)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			if _, err := job.Run(context.Background(), fs); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if gjson.Get(l, "message").String() != "progress" {
					continue
				}
				n++
				if gjson.Get(l, "offsets_total").Int() != 1000 || !gjson.Get(l, "written").Exists() ||
					!gjson.Get(l, "offsets_done").Exists() || !gjson.Get(l, "records_per_second").Exists() {
					t.Errorf("progress line: %s", l)
				}
			}
			if (every > 0) != (n > 0) {
				t.Errorf("ProgressEvery %s: %d progress lines\n%s", every, n, logs.String())
			}
		})
	}
}

// Read counts the records a run processed, not those fetched ahead: after
// an interruption each partition's Read is what lies between where it
// started and where it stopped (the topic has no gaps, no filter drops).
// Regression: Read counted every fetched record, and a run stopped at a
// third of its window showed most of the window read.
func TestReadCountsProcessedRecords(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 6000, t0, time.Hour)
	p, out := filePlan(t, sb, timeWindow(t0, t0.Add(time.Hour)))
	p.Sink.BatchSize = 50
	c := connect(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	defer fs.Close()
	rep, err := job.Run(ctx, &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
		if n == 4 {
			cancel()
		}
		return nil
	}})
	if !errors.Is(err, ErrInterrupted) || rep == nil {
		t.Fatalf("want an interrupted run with a report, got %v", err)
	}
	var read, total int64
	for _, pr := range rep.Partitions {
		read += pr.Read
		total += pr.End - pr.Start
		if pr.Read != pr.Next-pr.From {
			t.Errorf("partition %d: read %d, but it processed [%d, %d) (%d records); written %d", pr.Partition, pr.Read, pr.From, pr.Next, pr.Next-pr.From, pr.Written)
		}
	}
	if read == 0 || read >= total {
		t.Errorf("read %d of %d: want the part processed before the interruption", read, total)
	}
}

// The group's offsets are read back at the end of a run: a partition whose
// committed offset is below where it ended (a commit that landed late) is
// committed at its end again, with the sinks' positions of its last
// commit; one at its end is left alone.
func TestConfirmCommitsAtTheEnd(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 2000, t0, time.Hour)
	p, _ := filePlan(t, sb, timeWindow(t0, t0.Add(time.Hour)))
	c := connect(t, p)
	job, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]partitionEnd{}
	for _, pr := range rep.Partitions {
		ends[pr.Partition] = partitionEnd{next: pr.Next, pos: 4242 + int64(pr.Partition), deadPos: 7}
	}
	// A late commit moves partition 1 back.
	r1 := job.Resolution.Ranges[1]
	if err := group.Commit(context.Background(), c.Cluster, nil, p.Group, "orders", map[int32]int64{r1.Partition: r1.Start + 1}, map[int32]group.Meta{r1.Partition: job.meta(r1.Start, r1.End, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	if got := commits(t, c, p.Group, "orders", r1.Partition)[r1.Partition].Offset; got != r1.Start+1 {
		t.Fatalf("the late commit did not land: %d", got)
	}
	fs, err := file.NewJSONL(filepath.Join(t.TempDir(), "x.jsonl"), job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := (ending{job}).confirmCommits(context.Background(), fs, ends); err != nil {
		t.Fatal(err)
	}
	for part, cp := range commits(t, c, p.Group, "orders", 0, 1) {
		if cp.Offset != ends[part].next {
			t.Errorf("partition %d: committed %d after the read-back, want its end %d", part, cp.Offset, ends[part].next)
		}
	}
	if cp := commits(t, c, p.Group, "orders", r1.Partition)[r1.Partition]; cp.Position != ends[r1.Partition].pos || cp.DeadLetterPosition != 7 {
		t.Errorf("partition %d committed again with positions %d/%d, want %d/7: a resume would not see what the sinks hold", r1.Partition, cp.Position, cp.DeadLetterPosition, ends[r1.Partition].pos)
	}
}
