package runner

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/replay-tool/replay/runner/source"
)

// reader builds the worker's partition reader with the plan's data-loss
// policy and the partition's logger.
func (w *partitionWorker) reader() *source.Reader {
	j, s := w.job, w.state
	return j.c.NewReader(source.ReaderConfig{Topic: j.Resolution.Topic, Partition: s.Partition, Isolation: j.Plan.Source.Isolation,
		Start: s.from, End: s.End, AllowLoss: j.Plan.AllowDataLoss, Log: &w.log})
}

// failLost ends a partition whose records were deleted under the reader.
// The records already fetched are written and committed first: they exist
// nowhere else any more, and then the checkpoint stands exactly at the
// first lost offset that the error names.
func (w *partitionWorker) failLost(ctx context.Context, err error) error {
	if !isDataLoss(err) {
		return err
	}
	var ferr error
	if len(w.pending) > 0 {
		ferr = w.flush(ctx, len(w.pending))
	}
	if ferr == nil {
		ferr = w.commits.Commit()
	}
	if ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// isDataLoss reports whether err is exactly a partition's data loss (and
// not also a sink or commit failure).
func isDataLoss(err error) bool {
	pe, ok := err.(*PartitionError)
	if !ok {
		return false
	}
	_, ok = pe.Err.(*DataLossError)
	return ok
}

// partitionErrors collects failures that stop one partition but let the
// others run to their end (records deleted under the reader): the run
// still fails, once the other partitions are done.
type partitionErrors struct {
	mu   sync.Mutex
	errs []error
}

// keep takes err when it is a partition's data loss and returns nil then.
func (l *partitionErrors) keep(err error) error {
	if !isDataLoss(err) {
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

// lostOffsets returns how many offsets of the window were lost, and where:
// a start deleted before the run (Range.Lost, allow_data_loss) and what
// was deleted under the reader.
func (s *partitionState) lostOffsets() (int64, []Gap) {
	var gaps []Gap
	if s.Lost > 0 {
		gaps = append(gaps, Gap{From: s.from - s.Lost, To: s.from})
	}
	gaps = append(gaps, s.lost...)
	var n int64
	for _, g := range gaps {
		n += g.Len()
	}
	return n, gaps
}
