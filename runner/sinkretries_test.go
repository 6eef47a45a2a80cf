package runner

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
)

// selfCountingSink is a flakySink that counts retries of its own, as the
// exactly-once kafka sink does (Retries).
type selfCountingSink struct {
	*flakySink
	own int64
}

func (s selfCountingSink) Retries() int64 { return s.own }

// The report counts the sink's retries, one per try made again: a batch
// written on its third try counts two, and the retries a sink made by
// itself (Retries) are added; every retry of the runner is a warning in
// the log, and the partitions' counts add up to the total. Before, sink
// retries were logged but counted nowhere.
func TestSinkRetriesCounted(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 600, t0, time.Hour)
	p, _ := errorPlan(t, sb, 2, 50, "on_error: skip")
	opts := testOptions(t)
	buf := &testenv.Buffer{}
	opts.Log = zerolog.New(zerolog.MultiLevelWriter(buf, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	opts.Retry = worker.Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}
	job, err := Prepare(context.Background(), connect(t, p), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	failing := map[int]bool{1: true, 2: true, 7: true, 10: true} // calls 1 and 2: the same batch twice
	sink := selfCountingSink{own: 5, flakySink: &flakySink{Sink: fs, written: false, fail: func(call int) error {
		if failing[call] {
			return fmt.Errorf("postgres sink: upsert: %w", &sinks.TransientError{Err: syscall.ECONNRESET})
		}
		return nil
	}}}
	rep, err := job.Run(context.Background(), sink)
	if err != nil {
		t.Fatal(err)
	}
	logged := strings.Count(buf.String(), "transient error, retrying")
	testenv.MillisFields(t, buf.String(), "transient error, retrying", "retry_in_ms", "budget_left_ms")
	var parts int64
	for _, pr := range rep.Partitions {
		parts += pr.SinkRetries
	}
	t.Logf("report: %d sink retries (partitions %d), %d logged", rep.SinkRetries, parts, logged)
	if parts != 4 || logged != 4 {
		t.Errorf("partitions count %d retries, log %d: want the 4 failed tries", parts, logged)
	}
	if rep.SinkRetries != 4+5 {
		t.Errorf("report: %d sink retries, want 9 (the runner's 4 and the sink's own 5)", rep.SinkRetries)
	}
	if s := job.Progress(); s.SinkRetries != rep.SinkRetries {
		t.Errorf("progress: %d sink retries, the report %d", s.SinkRetries, rep.SinkRetries)
	}
	if rep.DeadLetterRetries != 0 {
		t.Errorf("report: %d dead-letter retries, want 0", rep.DeadLetterRetries)
	}
	requireCommitsAtEnds(t, p, rep)
}
