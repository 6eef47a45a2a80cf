package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

// ErrInterrupted is returned (wrapped) when a run's context was cancelled
// (a signal): the in-flight batch was written and committed, and
// re-running the same plan resumes from there.
var ErrInterrupted = errors.New("interrupted")

// maxActivePartitions bounds the partitions a run reads at once; the
// others start as these finish their ranges. Each partition being read
// has two goroutines (its worker and its prefetcher, a few KiB of stack
// each, which the GC scans at every cycle), and the readers' FetchBudget
// lets only a few dozen of them hold fetched records at a time anyway:
// with 3000 partitions all started at once, goroutine stacks alone were
// 24 MiB of a run's first second. 256 against 512 cut the peak RSS of a
// 1000-partition run by 2-4 MiB and its GC cycles by a quarter, at no
// loss of speed (the budget, not the partitions, limits the reading).
const maxActivePartitions = 256

// RunAll replays states under p, one Worker per partition (at most
// maxActivePartitions at once), and counts the records that cannot be
// processed against the plan's max_errors over all of them. A partition
// whose records were deleted under the reader, or that an open
// transaction held for too long, stops alone: the others run to their
// end, and its error comes back with theirs. A cancelled ctx (a signal)
// is an error wrapping ErrInterrupted that says what the in-flight
// batches became.
func RunAll(ctx context.Context, p *Policy, states []*State) error {
	r := &shared{Policy: p, throttle: NewThrottle(p.Limit)}
	pipe, err := pipeline.New(p.Plan, sinks.CapabilitiesOf(p.Sink).Keys, pipeline.WithDecoder(ctx, p.Decoder))
	if err != nil {
		return err
	}
	if p.Plan.DeadLetter != nil {
		if r.deadKey, err = pipeline.NewKey(*p.Plan.DeadLetter, sinks.CapabilitiesOf(p.DeadLetters).Keys); err != nil {
			return fmt.Errorf("dead-letter sink: %w", err)
		}
	}
	var records int64
	var todo []*State
	for _, s := range states {
		records += max(s.End-s.From, 0)
		if s.From >= s.End {
			s.Next.Store(s.From)
			s.Done.Store(true)
			continue
		}
		todo = append(todo, s)
	}
	r.budget = &errorBudget{limit: p.Plan.MaxErrors, allowed: p.Plan.MaxErrors.Allowed(records), records: records}
	warnThinThrottle(p.Log, p.Limit, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	var lost partitionErrors // data loss stops one partition, not the run
	g.SetLimit(maxActivePartitions)
	for _, s := range todo {
		w := newWorker(r, s, pipe.Partition())
		g.Go(func() error { return lost.keep(w.Run(gctx)) })
	}
	err = cmp.Or(g.Wait(), ctx.Err())
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %s; re-run the same command to resume", ErrInterrupted, interruptedOutcome(states))
	}
	return lost.join(err)
}

// partitionErrors collects failures that stop one partition but let the
// others run to their end: the run still fails once they are done.
type partitionErrors struct {
	mu   sync.Mutex
	errs []error
}

// keep takes err when it is a partition's data loss or open transaction
// (stopsOnePartition) and returns nil then.
func (l *partitionErrors) keep(err error) error {
	if !stopsOnePartition(err) {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
	return nil
}

// join adds the kept errors to err.
func (l *partitionErrors) join(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return err
	}
	return errors.Join(append(slices.Clone(l.errs), err)...)
}

// warnThinThrottle warns when limit spreads its records over so many
// partitions (n to read) that each writes (and commits) less often than
// max_batch_wait.
func warnThinThrottle(log zerolog.Logger, limit plan.Throttle, n int) {
	if limit.RecordsPerSecond <= 0 || n == 0 {
		return
	}
	if every := float64(n) / limit.RecordsPerSecond; every > time.Duration(limit.MaxBatchWait).Seconds() {
		log.Warn().Float64("records_per_second", limit.RecordsPerSecond).Int("partitions", n).
			Msgf("the throttle gives each of %d partitions %.2g records/s: each writes and commits one record about every %.1fs, more than max_batch_wait (%s)",
				n, limit.RecordsPerSecond/float64(n), every, time.Duration(limit.MaxBatchWait))
	}
}

// interruptedOutcome says what an interrupted run left in the sink and the
// group: writes committed, abandoned with the sink failing, or written but
// not committed.
func interruptedOutcome(states []*State) string {
	var abandoned, uncommitted []string
	fine := 0
	for _, s := range states {
		at := fmt.Sprintf("%s at offset %d", s.TopicPartition, s.Next.Load())
		switch {
		case s.Abandoned.Load():
			abandoned = append(abandoned, at)
		case s.Uncommitted.Load():
			uncommitted = append(uncommitted, at)
		case s.From < s.End:
			fine++
		}
	}
	if len(abandoned) == 0 && len(uncommitted) == 0 {
		return "the in-flight batches were written and committed"
	}
	var parts []string
	if len(abandoned) > 0 {
		parts = append(parts, "the sink was failing, so the batch in flight was not written (or not confirmed) and is not committed on "+strings.Join(abandoned, ", "))
	}
	if len(uncommitted) > 0 {
		parts = append(parts, "records were written but their commit failed on "+strings.Join(uncommitted, ", "))
	}
	if fine > 0 {
		parts = append(parts, "the other partitions' in-flight batches were written and committed")
	}
	return strings.Join(parts, "; ") + "; the offsets named are what the group holds, and a resume delivers what follows them again (idempotently)"
}
