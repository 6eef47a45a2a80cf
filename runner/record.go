package runner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// ReadRunRecord reads this machine's record of p's run on c from dir (see
// Options.StateDir); nil when there is none, or only a reset one.
func ReadRunRecord(dir string, c *Cluster, p *plan.Plan) (*group.RunRecord, error) {
	id := ""
	if c != nil && c.Cluster != nil {
		id = c.ID
	}
	r, err := group.ReadRecord(dir, id, p)
	if err != nil || !r.Progress() {
		return nil, err
	}
	return r, nil
}

// recordsRuns reports whether the job keeps a local run record: a plain
// run of a plan without a schedule, with a state directory.
func (j *Job) recordsRuns() bool {
	return j.opts.StateDir != "" && j.Interval == nil && !j.opts.Join
}

// saveRecord writes the job's run record in state, with next(r) as each
// range's committed offset. A record that cannot be written costs a
// warning: the run itself is not at risk, only the refusal of a later run
// whose group lost its commits.
func (j *Job) saveRecord(state string, next func(Range) int64) {
	if !j.recordsRuns() {
		return
	}
	r := &group.RunRecord{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Group: j.Plan.Group, Topic: j.Resolution.Topic,
		ClusterID: j.SourceClusterID(), State: state, ResolvedAt: j.Resolution.ResolvedAt}
	if j.record != nil && j.record.Progress() && slices.EqualFunc(j.record.Ranges, j.Resolution.Ranges, func(a group.RecordedRange, b Range) bool {
		return a.Partition == b.Partition && a.Start == b.Start && a.End == b.End
	}) {
		r.ResolvedAt = j.record.ResolvedAt // the same run, resumed
	}
	for _, rg := range j.Resolution.Ranges {
		r.Ranges = append(r.Ranges, group.RecordedRange{Partition: rg.Partition, Start: rg.Start, End: rg.End, Committed: next(rg)})
	}
	if err := r.Write(j.opts.StateDir); err != nil {
		j.opts.Log.Warn().Err(err).Str("path", r.Path()).Msg("could not write the run record: a later run of this plan cannot tell when the group's commits are gone")
		return
	}
	j.record = r
}

// ForgetRun marks the local record of p's run on c reset (`replay reset`):
// the group's offsets were deleted on purpose, and the next run resolves
// the window afresh instead of refusing. Nothing happens when dir is "".
func ForgetRun(dir string, c *Cluster, p *plan.Plan) error {
	if dir == "" {
		return nil
	}
	id := ""
	if c != nil && c.Cluster != nil {
		id = c.ID
	}
	r, err := group.ReadRecord(dir, id, p)
	if err != nil || r == nil {
		r = &group.RunRecord{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Topic: p.Source.Topic, ClusterID: id}
	}
	r.State = group.RecordReset
	return r.Write(dir)
}

// withoutCommits applies decideNoCommits to a fresh job whose group holds
// no commit on the plan's topic.
func (j preparing) withoutCommits() error {
	d, err := decideNoCommits(j.Plan, j.record, j.opts.Restart, j.opts.ResumeFromSink)
	if err != nil {
		return err
	}
	if d.fromSink {
		j.Fresh, j.fromSink = d.fresh, true
	}
	j.checkSink = j.checkSink || d.checkSink
	return nil
}

// fromRecord fixes the job's ranges to those of its run record, which the
// group lost: from their starts with Restart, else from the sink's
// checkpoints (ResumeFromSink). A window is never resolved anew, and so
// never wider, than the run first fixed it.
func (j preparing) fromRecord(ctx context.Context, all []int32) error {
	p, rec := j.Plan, j.record
	res := &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: p.Source.Topic, Group: p.Group, ResolvedAt: rec.ResolvedAt}
	outcome := Resumed
	if j.opts.Restart {
		outcome = InRange
	}
	var parts []int32
	for _, r := range rec.Ranges {
		if !slices.Contains(all, r.Partition) {
			return fmt.Errorf("the run record %s has partition %s/%d, which the topic no longer has (it has %d partitions): was it deleted and created again? Remove the record to resolve the window afresh", rec.Path(), p.Source.Topic, r.Partition, len(all))
		}
		parts = append(parts, r.Partition)
		res.Ranges = append(res.Ranges, Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: outcome})
	}
	offs, err := j.c.ListOffsets(ctx, p.Source.Topic, parts, p.Source.Isolation)
	if err != nil {
		return err
	}
	j.Resolution, j.Fresh, j.fromSink = res, j.opts.Restart, !j.opts.Restart
	j.Resume, j.committed, j.positions, j.dlPositions = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	for i := range res.Ranges {
		if err := j.pinRange(ctx, &res.Ranges[i], offs[res.Ranges[i].Partition]); err != nil {
			return err
		}
	}
	for _, part := range all {
		if !slices.Contains(parts, part) {
			j.Ignored = append(j.Ignored, part)
		}
	}
	j.opts.Log.Warn().Str("plan", p.Name).Str("group", p.Group).Str("record", rec.Path()).Bool("restart", j.opts.Restart).
		Msg("the group has no commits of this plan: taking the ranges the run record fixed")
	return nil
}

// partlyLost checks a resumed job against its run record: partitions the
// record has and the group lost the commits of (deleted one by one) are
// refused, or, with ResumeFromSink, added back with their recorded ranges,
// to continue from the sink's checkpoints. A record of another run of the
// plan (other ranges) is ignored.
func (j preparing) partlyLost(ctx context.Context, cps map[int32]group.Checkpoint) error {
	rec := j.record
	if !rec.Progress() {
		return nil
	}
	var missing []group.RecordedRange
	for _, r := range rec.Ranges {
		if cp, ok := cps[r.Partition]; ok && cp.Offset >= 0 {
			if cp.Start != r.Start || cp.End != r.End {
				return nil
			}
			continue
		}
		missing = append(missing, r)
	}
	if len(missing) == 0 {
		return nil
	}
	if !j.opts.ResumeFromSink {
		return group.RecordRefusal(j.Plan, j.record, missing)
	}
	parts := make([]int32, len(missing))
	for i, r := range missing {
		parts[i] = r.Partition
	}
	offs, err := j.c.ListOffsets(ctx, j.Plan.Source.Topic, parts, j.Plan.Source.Isolation)
	if err != nil {
		return err
	}
	for _, r := range missing {
		rg := Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: Resumed}
		if err := j.pinRange(ctx, &rg, offs[r.Partition]); err != nil {
			return err
		}
		j.Resolution.Ranges = append(j.Resolution.Ranges, rg)
		drop := func(p int32) bool { return p == r.Partition }
		j.Ignored, j.Added = slices.DeleteFunc(j.Ignored, drop), slices.DeleteFunc(j.Added, drop)
	}
	slices.SortFunc(j.Resolution.Ranges, func(a, b Range) int { return cmp.Compare(a.Partition, b.Partition) })
	j.fromSink = true
	return nil
}

// checkSinkRecord runs before a job writes or commits anything. A fresh
// job on a group without commits (checkSink) is refused when the sink's
// checkpoint table records progress of this run: the group lost its
// commits. A job continuing from the sink (fromSink) needs the sink's
// checkpoints for its ranges (the same ranges as the run that wrote them),
// or it is refused rather than started over.
func (j *Job) checkSinkRecord(ctx context.Context, sink sinks.Sink) error {
	if !j.checkSink && !j.fromSink {
		return nil
	}
	p := j.Plan
	store := sinks.CapabilitiesOf(sink).Checkpoints
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

func (j *Job) rangesText() string {
	s := make([]string, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		s[i] = fmt.Sprintf("%d [%d, %d)", r.Partition, r.Start, r.End)
	}
	return strings.Join(s, ", ")
}
