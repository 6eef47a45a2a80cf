package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// checkResume refuses (*fault.SafetyError with fault.HintRestart, the sink's error in
// its chain) to resume a run whose earlier output
// the sink, or the dead-letter sink, no longer holds (sinks.Resumer): the
// staging of a file sink deleted or found through a relative path from
// another working directory, a SQLite database created afresh. Resuming
// would write the remainder of the window only and publish a partial
// output. It runs before anything is committed or written; a fresh run has
// nothing to check.
func (j *Job) checkResume(sink sinks.Sink) error {
	if j.Fresh || len(j.committed) == 0 {
		return nil
	}
	for _, s := range j.resumedSinks(sink) {
		rs := sinks.CapabilitiesOf(s.sink).Resumer
		if rs == nil {
			continue
		}
		if err := rs.CheckResume(j.resumePoints(s.pos)); err != nil {
			return &fault.SafetyError{Group: j.Plan.Group, Hint: fault.HintRestart, Err: err,
				Reason: fmt.Sprintf("it records a run of plan %s that cannot resume: %s%v", j.Plan.Name, s.what, err)}
		}
	}
	return nil
}

// resumedSink is the sink or the dead-letter sink of a resumed run, with
// the positions the group's commits recorded for it.
type resumedSink struct {
	what string // "" or "dead letters: ", for messages
	sink sinks.Sink
	pos  map[int32]int64
}

func (j *Job) resumedSinks(sink sinks.Sink) []resumedSink {
	return []resumedSink{{"", sink, j.positions}, {"dead letters: ", j.DeadLetters, j.dlPositions}}
}

// resumePoints are the partitions of a resumed run, with the sink's
// positions pos.
func (j *Job) resumePoints(pos map[int32]int64) []sinks.ResumePoint {
	points := make([]sinks.ResumePoint, 0, len(j.Resolution.Ranges))
	for _, r := range j.Resolution.Ranges {
		committed, ok := j.committed[r.Partition]
		if !ok {
			committed = r.Start
		}
		points = append(points, sinks.ResumePoint{Partition: r.Partition, Start: r.Start, Committed: committed, End: r.End,
			Position: pos[r.Partition]})
	}
	return points
}

// reconcile resumes each partition whose output a sink (or the
// dead-letter sink) no longer holds up to the group's commit
// (sinks.Reconciler: a table dropped, truncated, restored from a backup, a
// replica that lagged taking over) where the sink's output really ends,
// with a warning naming what the sink found: the records from there are
// written again, which idempotent writes make safe, instead of being
// missing from a run that succeeds. commitStarts then commits that start to
// the group. A rewind below the first offset the topic still stores is a
// *RetentionError without allow_data_loss. It runs after checkResume and
// before anything is committed or written; a fresh run has nothing to
// reconcile.
func (j *Job) reconcile(ctx context.Context, sink sinks.Sink) error {
	if j.Fresh || len(j.committed) == 0 {
		return nil
	}
	for _, s := range j.resumedSinks(sink) {
		rc := sinks.CapabilitiesOf(s.sink).Reconciler
		if rc == nil {
			continue
		}
		rewinds, err := rc.Reconcile(ctx, j.Plan.Group, j.Resolution.Topic, j.resumePoints(s.pos))
		if err != nil {
			return fmt.Errorf("%scheck what the sink holds before resuming: %w", s.what, err)
		}
		for _, rw := range rewinds {
			if err := j.rewind(s, rw); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewind resumes rw's partition at rw.From, when that is below where it
// would resume.
func (j *Job) rewind(s resumedSink, rw sinks.Rewind) error {
	i := slices.IndexFunc(j.Resolution.Ranges, func(r Range) bool { return r.Partition == rw.Partition })
	if i < 0 {
		return nil
	}
	r := j.Resolution.Ranges[i]
	from := max(rw.From, r.Start)
	if from >= j.from(r) {
		return nil
	}
	if from < r.LogStart {
		if !j.Plan.AllowDataLoss {
			return &RetentionError{Topic: j.Resolution.Topic, Partition: r.Partition, Start: from, LogStart: r.LogStart}
		}
		from = r.LogStart
	}
	j.opts.Log.Warn().Str("topic", j.Resolution.Topic).Int32("partition", r.Partition).Int64("kafka_commit", j.from(r)).
		Int64("resume_at", from).Msgf("%sthe sink no longer holds what the group's commit records as written: %s; writing the partition again from offset %d (idempotent writes leave each record once)",
		s.what, rw.Reason, from)
	if j.Resume == nil {
		j.Resume = map[int32]int64{}
	}
	j.Resume[r.Partition] = from
	if s.pos != nil {
		s.pos[r.Partition] = rw.Position
	}
	return nil
}

// resumeFromSink reconciles the Kafka commits with the checkpoints a sink
// keeps in its own transactions (sinks.CheckpointStore, a database sink with
// checkpoint_table). A Kafka commit that failed after the sink committed a
// batch lags what the sink holds: each partition then starts at the sink's
// checkpoint instead, so nothing the sink holds is delivered again, and
// that start is committed to the group before anything is read.
//
// It runs after commitStarts (which fenced the group) and before the
// partitions start. A fresh run resets the sink's checkpoints instead: the
// previous run's (possibly of the same identity, after --restart) must not
// skip this run's records. With on_error: dead_letter the sink's
// checkpoints are not used, since dead letters are written after the
// sink's transaction and a checkpoint past them could lose them.
func (j *Job) resumeFromSink(ctx context.Context, sink sinks.Sink, states []*worker.State) error {
	store := sink.Capabilities().Checkpoints
	if store == nil {
		return nil
	}
	g, topic := j.Plan.Group, j.Resolution.Topic
	if j.Fresh {
		if err := store.ResetCheckpoints(ctx, g, topic); err != nil {
			return fmt.Errorf("reset the sink's checkpoints: %w", err)
		}
		return nil
	}
	if j.Plan.OnError == plan.OnErrorDeadLetter {
		return nil
	}
	cps, err := store.Checkpoints(ctx, g, topic)
	if err != nil {
		return fmt.Errorf("read the sink's checkpoints: %w", err)
	}
	offsets := map[int32]int64{}
	meta := map[int32]group.Meta{}
	for _, s := range states {
		next, ok := cps[s.Partition]
		if !ok || next <= s.From || next > s.End {
			continue // behind the Kafka commit, or not this range's
		}
		j.opts.Log.Info().Str("topic", topic).Int32("partition", s.Partition).Int64("kafka_commit", s.From).
			Int64("sink_checkpoint", next).Msg("the sink holds records past the Kafka commit: resuming after them")
		s.From = next
		if j.Resume == nil {
			j.Resume = map[int32]int64{}
		}
		j.Resume[s.Partition] = next
		offsets[s.Partition], meta[s.Partition] = next, j.meta(s.Start, s.End)
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := j.commits.Load().Commit(ctx, offsets, meta); err != nil {
		return fmt.Errorf("commit the sink's checkpoints to group %s: %w", g, err)
	}
	return nil
}

// syncStarts makes a sink that batches durability (sinks.Syncer) hold
// what commitStarts is about to commit past the group's checkpoint (a
// start moved past records lost to retention, with allow_data_loss): the
// file sink then has the partition's staging file, empty, which
// CheckResume looks for on the next resume.
func (j *Job) syncStarts(ctx context.Context, sink sinks.Sink) error {
	for _, r := range j.Resolution.Ranges {
		held, ok := j.committed[r.Partition]
		if !ok {
			held = r.Start
		}
		if j.from(r) <= held {
			continue
		}
		for _, s := range []struct {
			what string
			sink sinks.Sink
		}{{"sink " + string(j.Plan.Sink.Type), sink}, {"dead-letter sink", j.DeadLetters}} {
			if sy := sinks.CapabilitiesOf(s.sink).Syncer; sy != nil {
				if err := sy.Sync(ctx, r.Partition); err != nil {
					return fmt.Errorf("%s: sync partition %d: %w", s.what, r.Partition, err)
				}
			}
		}
	}
	return nil
}

// openDeadLetters opens the plan's dead-letter sink when on_error is
// dead_letter and the caller did not set Job.DeadLetters.
func (j *Job) openDeadLetters(ctx context.Context) (closeFn func(), err error) {
	if j.Plan.OnError != plan.OnErrorDeadLetter || j.DeadLetters != nil {
		return func() {}, nil
	}
	if j.Plan.DeadLetter == nil {
		return nil, errors.New("on_error is dead_letter but the plan has no dead_letter sink")
	}
	s, err := registry.NewDeadLetter(ctx, *j.Plan.DeadLetter, sinks.Options{Log: j.opts.Log, PlanName: j.Plan.Name, RunID: j.RunID()})
	if err != nil {
		return nil, err
	}
	j.DeadLetters = s
	return func() { s.Close(); j.DeadLetters = nil }, nil
}
