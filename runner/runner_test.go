package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"

	"github.com/segmentio/kafka-go"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
)

func timeWindow(from, to time.Time) string {
	return fmt.Sprintf("  from: %s\n  to: %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
}

// requireKcat skips the test when kcat is missing, except in CI where it fails.
func requireKcat(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed: .ci/run installs it (apt-get install -y kcat)")
		}
		t.Skip("KCAT NOT INSTALLED: skipping a differential test (apt-get install -y kcat)")
	}
}

// The (partition, offset) set a time window delivers equals what kcat reads
// for the same window on a topic with monotonic timestamps.
func TestTimeWindowMatchesKcat(t *testing.T) {
	sb := newTestCluster(t, 6, "orders")
	seed(t, sb, "orders", 20000, t0, 24*time.Hour)
	from, to := t0.Add(6*time.Hour), t0.Add(8*time.Hour+30*time.Minute)
	p, out := filePlan(t, sb, timeWindow(from, to))
	_, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := readCoords(t, out)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, from, to)
	if len(want) == 0 {
		t.Fatal("kcat read nothing: the test data is wrong")
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("replay delivered %d records, kcat %d: %s", len(got), len(want), diff(want, got))
	}
	_, written, _ := rep.Totals()
	if written != int64(len(want)) {
		t.Fatalf("report says %d written, file has %d", written, len(want))
	}
	// Every partition is committed at its resolved end.
	c := connect(t, p)
	for _, pr := range rep.Partitions {
		cp := commits(t, c, "replay.test", "orders", pr.Partition)[pr.Partition]
		if cp.Offset != pr.End || !cp.Done() {
			t.Errorf("partition %d committed %d, want end %d", pr.Partition, cp.Offset, pr.End)
		}
	}
}

// A window after the last record replays nothing (never the live end, never
// the whole topic), commits every partition at its high watermark and ends.
func TestWindowAfterLastRecord(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 300, t0, time.Hour)
	p, out := filePlan(t, sb, fmt.Sprintf("  from: %s", t0.Add(2*time.Hour).Format(time.RFC3339)))
	job, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readCoords(t, out); len(got) != 0 {
		t.Fatalf("wrote %d records, want none", len(got))
	}
	c := connect(t, p)
	for _, r := range job.Resolution.Ranges {
		if r.Outcome != AfterLastRecord || r.Start != r.HighWatermark || r.End != r.HighWatermark {
			t.Errorf("partition %d: %+v, want an empty range at the high watermark", r.Partition, r)
		}
		if cp := commits(t, c, "replay.test", "orders", r.Partition)[r.Partition]; cp.Offset != r.HighWatermark {
			t.Errorf("partition %d committed %d, want high watermark %d", r.Partition, cp.Offset, r.HighWatermark)
		}
	}
	if len(rep.Partitions) != 3 {
		t.Fatalf("report has %d partitions, want 3", len(rep.Partitions))
	}
}

func TestWindowBeforeFirstRecordAndEmptyPartition(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	w := &kafka.Writer{Addr: kafka.TCP(sb.Addr), Topic: "orders", RequiredAcks: kafka.RequireAll, Balancer: balancer(0)}
	defer w.Close()
	var msgs []kafka.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i)), Time: t0.Add(time.Duration(i) * time.Minute)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	p, out := filePlan(t, sb, timeWindow(t0.Add(-time.Hour), t0.Add(-time.Minute)))
	job, _, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]Outcome{0: BeforeFirstRecord, 1: EmptyPartition}
	if len(job.Resolution.Ranges) != len(want) {
		t.Fatalf("resolved %d ranges, want one per partition (%d): %+v", len(job.Resolution.Ranges), len(want), job.Resolution.Ranges)
	}
	for _, r := range job.Resolution.Ranges {
		if r.Outcome != want[r.Partition] || r.Records() != 0 {
			t.Errorf("partition %d: outcome %s with %d records, want %s and 0", r.Partition, r.Outcome, r.Records(), want[r.Partition])
		}
	}
	if got := readCoords(t, out); len(got) != 0 {
		t.Fatalf("wrote %v, want nothing", got)
	}
}

// balancer sends every message to one partition.
type balancer int

func (b balancer) Balance(kafka.Message, ...int) int { return int(b) }

func TestOffsetsWindowEarliestLatest(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 1000, t0, time.Hour)
	p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}, 1: {from: 10, to: 20}}")
	job, _, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range job.Resolution.Ranges {
		if r.Partition == 0 && (r.Start != 0 || r.End != r.HighWatermark) {
			t.Errorf("partition 0 resolved to [%d, %d), want [0, %d)", r.Start, r.End, r.HighWatermark)
		}
		for o := r.Start; o < r.End; o++ {
			want = append(want, fmt.Sprintf("%d/%d", r.Partition, o))
		}
	}
	if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("offsets window: %s", diff(want, got))
	}
	if !slices.Contains(want, "1/10") || slices.Contains(want, "1/20") {
		t.Fatalf("partition 1 must be [10, 20): %v", want)
	}
}

// Retention deleted the start of the window: resolution fails and names the
// partition and the first offset still available.
func TestStartBeforeRetention(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 1000, t0, time.Hour)
	if err := sb.DeleteRecords("orders", 0, 500); err != nil {
		t.Fatal(err)
	}
	p, _ := filePlan(t, sb, timeWindow(t0.Add(10*time.Minute), t0.Add(50*time.Minute)))
	_, _, err := runPlan(t, context.Background(), p, nil)
	var re *RetentionError
	if !errors.As(err, &re) || re.Partition != 0 || re.LogStart != 500 {
		t.Fatalf("want a RetentionError for partition 0 at log start 500, got %v", err)
	}
	if !strings.Contains(err.Error(), "orders/0") || !strings.Contains(err.Error(), "500") {
		t.Fatalf("message must name the partition and the first available offset: %v", err)
	}
}

// Retention deleted the partition past the window's end: with
// allow_data_loss the range is empty, and its detail says that the
// window's part of the partition is gone, not that the run replays from
// the first record still stored.
func TestRetentionPastTheWindow(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 1000, t0, time.Hour)
	if err := sb.DeleteRecords("orders", 0, 500); err != nil {
		t.Fatal(err)
	}
	p, _ := filePlan(t, sb, timeWindow(t0.Add(10*time.Minute), t0.Add(20*time.Minute)))
	p.AllowDataLoss = true
	job, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	rg := job.Resolution.Ranges[0]
	if rg.Start != rg.End || rep.Partitions[0].Written != 0 {
		t.Fatalf("range [%d, %d), %d written: want an empty range", rg.Start, rg.End, rep.Partitions[0].Written)
	}
	if strings.Contains(rg.Detail, "replays from there") || !strings.Contains(rg.Detail, "at or after to") || !strings.Contains(rg.Detail, "nothing of this partition") {
		t.Errorf("detail: %s", rg.Detail)
	}
}

// hookSink runs fn before each Write of the wrapped sink.
type hookSink struct {
	sinks.Sink
	writes atomic.Int64
	fn     func(n int64, batch []record.Record) error
}

func (h *hookSink) Write(ctx context.Context, batch []record.Record) error {
	if err := h.fn(h.writes.Add(1), batch); err != nil {
		return err
	}
	return h.Sink.Write(ctx, batch)
}

// Capabilities: none. A hookSink hides what it wraps declares (a file
// sink's Sync among them), so the runner commits after every batch.
func (h *hookSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// Records deleted while the run reads them: the partition fails with
// OFFSET_OUT_OF_RANGE named, and the commit never passes what the sink holds.
func TestRetentionDuringRun(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 5000, t0, time.Hour)
	p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}}")
	c := connect(t, p)
	job, err := Prepare(context.Background(), c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	sink := &hookSink{Sink: fs, fn: func(n int64, b []record.Record) error {
		if n == 1 { // the reader is at most one fetch (a 2000-record batch) ahead
			return sb.DeleteRecords("orders", 0, 4999)
		}
		return nil
	}}
	_, err = job.Run(context.Background(), sink)
	var pe *PartitionError
	if !errors.As(err, &pe) || pe.Partition != 0 || !errors.Is(err, kafka.OffsetOutOfRange) {
		t.Fatalf("want OFFSET_OUT_OF_RANGE for partition 0, got %v", err)
	}
	fs.Close()
	cp := commits(t, c, "replay.test", "orders", 0)[0]
	staged := readCoords(t, out+".parts/partition-0.jsonl")
	if cp.Offset != int64(len(staged)) || cp.Offset == 0 {
		t.Fatalf("committed %d but the sink holds %d records", cp.Offset, len(staged))
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a failed run must not publish the output file")
	}
}

// Interrupted mid-way (a signal), then re-run: the output equals one clean
// run and the commits equal the ends. A re-run of the finished plan writes
// nothing.
func TestInterruptAndResume(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 6000, t0, time.Hour)
	p, out := filePlan(t, sb, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)))
	ctx, cancel := context.WithCancel(context.Background())
	c := connect(t, p)
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	_, err = job.Run(ctx, &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
		if n == 7 {
			cancel()
		}
		return nil
	}})
	fs.Close()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	mid := commits(t, c, "replay.test", "orders", 0, 1, 2)
	// Resume.
	job2, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if job2.Fresh {
		t.Fatal("the second run must resume, not resolve afresh")
	}
	resumedSomewhere := false
	for _, pr := range rep.Partitions {
		if pr.From != pr.Start {
			resumedSomewhere = true
		}
		if pr.From != max(mid[pr.Partition].Offset, pr.Start) {
			t.Errorf("partition %d resumed from %d, checkpoint was %d", pr.Partition, pr.From, mid[pr.Partition].Offset)
		}
	}
	if !resumedSomewhere {
		t.Fatal("no partition resumed from a checkpoint: the interruption came too late to test anything")
	}
	got := readCoords(t, out)
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, t0.Add(5*time.Minute), t0.Add(55*time.Minute))
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("after resume: %s", diff(want, got))
	}
	if hasDup(got) {
		t.Fatal("duplicates after resume")
	}
	// Finished: a third run has nothing to do.
	job3, err := Prepare(context.Background(), c, p, testOptions(t))
	if err != nil || !job3.NothingToDo() {
		t.Fatalf("re-run of a finished plan: nothing-to-do=%v err=%v", job3 != nil && job3.NothingToDo(), err)
	}
}

func hasDup(s []string) bool {
	s = sorted(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return true
		}
	}
	return false
}
