package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// settling is a Job between the start of Run and its first write, with
// the run's sink: it checks the sinks against the group's checkpoints,
// moves the starts where the sinks' output ends, and pins the ranges.
type settling struct {
	*Job
	sink sinks.Sink
	pin  bool // commitStarts marks the ranges pinned (group.Meta.Pin)
}

// settle runs the checks and moves of a run's start, in order, and returns
// the partitions' states from where each reads.
func (j settling) settle(ctx context.Context) ([]*worker.State, error) {
	if err := j.checkSinkRecord(ctx); err != nil {
		return nil, err
	}
	if err := j.checkResume(); err != nil {
		return nil, err
	}
	if err := j.reconcile(ctx); err != nil {
		return nil, err
	}
	if j.opts.Hold == nil { // under a hold, Run dropped them first
		if err := j.dropDiscarded(ctx); err != nil {
			return nil, err
		}
	}
	if err := j.syncStarts(ctx); err != nil {
		return nil, err
	}
	if err := j.commitStarts(ctx); err != nil {
		return nil, err
	}
	states := newStates(j.Resolution, j.readFrom)
	if err := j.resumeFromSink(ctx, states); err != nil {
		return nil, err
	}
	return states, nil
}

// checkResume refuses (*fault.SafetyError with fault.HintRestart, the
// sink's error in its chain) to resume a run whose earlier output the
// sink, or the dead-letter sink, no longer holds (sinks.Resumer: resuming
// would publish a partial output). A fresh run has nothing to check.
func (j settling) checkResume() error {
	if j.Fresh || len(j.committed) == 0 {
		return nil
	}
	for _, s := range j.resumedSinks() {
		rs := sinks.CapabilitiesOf(s.sink).Resumer
		if rs == nil {
			continue
		}
		if err := rs.CheckResume(j.resumePoints(s.i)); err != nil {
			return &fault.SafetyError{Group: j.Plan.Group, Hint: fault.HintRestart, Err: err,
				Reason: fmt.Sprintf("it records a run of plan %s that cannot resume: %s%v", j.Plan.Name, s.what, err)}
		}
	}
	return nil
}

// resumedSink is the sink or the dead-letter sink of a resumed run; i
// indexes its positions in held.pos.
type resumedSink struct {
	what string // "" or "dead letters: ", for messages
	sink sinks.Sink
	i    int
}

func (j settling) resumedSinks() []resumedSink {
	return []resumedSink{{"", j.sink, 0}, {"dead letters: ", j.DeadLetters, 1}}
}

// heldAt is r's checkpoint when the job was prepared, else r's start.
func (j settling) heldAt(r Range) held {
	if h, ok := j.committed[r.Partition]; ok {
		return h
	}
	return held{offset: r.Start}
}

// resumePoints are the partitions of a resumed run, with sink i's positions.
func (j settling) resumePoints(i int) []sinks.ResumePoint {
	points := make([]sinks.ResumePoint, 0, len(j.Resolution.Ranges))
	for _, r := range j.Resolution.Ranges {
		h := j.heldAt(r)
		points = append(points, sinks.ResumePoint{Partition: r.Partition, Start: r.Start, Committed: h.offset, End: r.End, Position: h.pos[i]})
	}
	return points
}

// reconcile resumes each partition whose output a sink (or the
// dead-letter sink) no longer holds up to the group's commit
// (sinks.Reconciler) where the sink's output really ends, with a warning
// naming what the sink found: the records from there are written again,
// which idempotent writes make safe, instead of being missing from a run
// that succeeds; commitStarts commits that start. A rewind below the first
// offset the topic still stores is a *RetentionError without
// allow_data_loss. A fresh run has nothing to reconcile.
func (j settling) reconcile(ctx context.Context) error {
	if j.Fresh || len(j.committed) == 0 {
		return nil
	}
	for _, s := range j.resumedSinks() {
		rc := sinks.CapabilitiesOf(s.sink).Reconciler
		if rc == nil {
			continue
		}
		rewinds, err := rc.Reconcile(ctx, j.Plan.Group, j.Resolution.Topic, j.resumePoints(s.i))
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
func (j settling) rewind(s resumedSink, rw sinks.Rewind) error {
	r, ok := j.Resolution.rangeOf(rw.Partition)
	if !ok {
		return nil
	}
	from := max(rw.From, r.Start)
	if from >= j.readFrom(r) {
		return nil
	}
	if from < r.LogStart {
		if !j.Plan.AllowDataLoss {
			return &RetentionError{Topic: j.Resolution.Topic, Partition: r.Partition, Start: from, LogStart: r.LogStart}
		}
		from = r.LogStart
	}
	j.opts.Log.Warn().Str("topic", j.Resolution.Topic).Int32("partition", r.Partition).Int64("kafka_commit", j.readFrom(r)).
		Int64("resume_at", from).Msgf("%sthe sink no longer holds what the group's commit records as written: %s; writing the partition again from offset %d (idempotent writes leave each record once)",
		s.what, rw.Reason, from)
	j.Resume[r.Partition] = from // a resumed job's (reconcile)
	if h, ok := j.committed[r.Partition]; ok {
		h.pos[s.i] = rw.Position
		j.committed[r.Partition] = h
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
func (j settling) resumeFromSink(ctx context.Context, states []*worker.State) error {
	store := j.sink.Capabilities().Checkpoints
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
	offsets, meta := map[int32]int64{}, map[int32]group.Meta{}
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
		offsets[s.Partition], meta[s.Partition] = next, j.meta(s.Start, s.End, 0, 0)
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := j.commits.Load().Commit(ctx, j.Resolution.Topic, offsets, meta); err != nil {
		return fmt.Errorf("commit the sink's checkpoints to group %s: %w", g, err)
	}
	return nil
}

// syncStarts makes a sink that batches durability (sinks.Syncer) hold
// what commitStarts is about to commit past the group's checkpoint (a
// start moved past lost records), for CheckResume on the next resume.
func (j settling) syncStarts(ctx context.Context) error {
	for _, r := range j.Resolution.Ranges {
		if j.readFrom(r) <= j.heldAt(r).offset {
			continue
		}
		for _, s := range []struct {
			what string
			sink sinks.Sink
		}{{"sink " + string(j.Plan.Sink.Type), j.sink}, {"dead-letter sink", j.DeadLetters}} {
			if sy := sinks.CapabilitiesOf(s.sink).Syncer; sy != nil {
				if err := sy.Sync(ctx, r.Partition); err != nil {
					return fmt.Errorf("%s: sync partition %d: %w", s.what, r.Partition, err)
				}
			}
		}
	}
	return nil
}

// checkSinkRecord runs before a job writes or commits anything. A fresh
// job on a group without commits (checkSink) is refused when the sink's
// checkpoint table records progress of this run: the group lost its
// commits. A job continuing from the sink (fromSink) needs the sink's
// checkpoints for its ranges (the same ranges as the run that wrote them),
// or it is refused rather than started over.
func (j settling) checkSinkRecord(ctx context.Context) error {
	if !j.checkSink && !j.fromSink {
		return nil
	}
	p := j.Plan
	store := sinks.CapabilitiesOf(j.sink).Checkpoints
	if store == nil || p.OnError == plan.OnErrorDeadLetter {
		if j.fromSink {
			return fmt.Errorf("resume from the sink: the %s sink keeps no checkpoints of its own (only %s does, without on_error: dead_letter)", p.Sink.Type, registry.Catalog().CheckpointKeepers())
		}
		return nil
	}
	cps, err := store.Checkpoints(ctx, p.Group, j.Resolution.Topic)
	if err != nil {
		return fmt.Errorf("read the sink's checkpoints: %w", err)
	}
	// Where the sink keeps them: "checkpoint table <name>".
	where := "checkpoints"
	if d := registry.Describe(p.Sink); d.Checkpoints != nil {
		where = d.Checkpoints(&p.Sink)
	}
	var recorded []group.RecordedRange
	for _, r := range j.Resolution.Ranges {
		if next, ok := cps[r.Partition]; ok {
			recorded = append(recorded, group.RecordedRange{Partition: r.Partition, Start: r.Start, End: r.End, Committed: next})
		}
	}
	switch {
	case j.fromSink && len(recorded) == 0:
		return &fault.SafetyError{Group: p.Group, Hint: fault.HintRestart, Reason: fmt.Sprintf("the sink's %s holds no checkpoint of this run of plan %s (ranges %s): there is nothing to resume from; the window may resolve to other ranges than the run that wrote it (an open-ended window grew): pass that run's ranges with --resolution FILE, or start over", where, p.Name, j.rangesText())}
	case j.fromSink:
		j.Fresh = false // resumeFromSink continues from them
		j.opts.Log.Info().Str("plan", p.Name).Str("group", p.Group).Int("partitions", len(recorded)).Msg("the group has no commits of this plan: continuing from the sink's checkpoints")
	case len(recorded) > 0:
		return (&group.ExpiredError{Group: p.Group, Plan: p.Name, Topic: j.Resolution.Topic, Where: "the sink's " + where, Recorded: recorded}).Refusal()
	}
	return nil
}

func (j settling) rangesText() string {
	s := make([]string, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		s[i] = fmt.Sprintf("%d [%d, %d)", r.Partition, r.Start, r.End)
	}
	return strings.Join(s, ", ")
}

// commitStarts pins the ranges in the group before anything is read: each
// partition's start offset with the range as metadata. The standalone
// commit also fences off a group that got live members since Prepare.
func (j settling) commitStarts(ctx context.Context) error {
	offsets, meta := map[int32]int64{}, map[int32]group.Meta{}
	for _, r := range j.Resolution.Ranges {
		// What the sinks held at that commit, and still hold (a start moved
		// past lost offsets adds nothing to the staging).
		h := j.heldAt(r).pos
		m := j.meta(r.Start, r.End, h[0], h[1])
		m.Pin = j.pin
		offsets[r.Partition], meta[r.Partition] = j.readFrom(r), m
	}
	if err := j.commits.Load().Commit(ctx, j.Resolution.Topic, offsets, meta); err != nil {
		return fmt.Errorf("pin the resolved ranges in group %s: %w", j.Plan.Group, err)
	}
	return nil
}

// dropDiscarded deletes the checkpoints of a run discarded by Restart on
// partitions outside a fresh job's new ranges (commitStarts overwrites the
// others). Under a hold, it leaves the group for the deletion
// (Hold.LeaveFor).
func (j settling) dropDiscarded(ctx context.Context) error {
	parts := slices.DeleteFunc(slices.Clone(j.discarded), func(part int32) bool { _, ok := j.Resolution.rangeOf(part); return ok })
	if !j.Fresh || len(parts) == 0 {
		return nil
	}
	drop := func(ctx context.Context) error {
		if err := group.DeleteCommits(ctx, j.c.Cluster, j.Plan.Group, j.Resolution.Topic, parts); err != nil {
			return fmt.Errorf("discard the earlier run's checkpoints in group %s: %w", j.Plan.Group, err)
		}
		return nil
	}
	if j.opts.Hold == nil {
		return drop(ctx)
	}
	return j.opts.Hold.LeaveFor(ctx, func() error { return drop(context.WithoutCancel(ctx)) })
}
