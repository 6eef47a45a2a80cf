package runner

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// ReadRunRecord reads this machine's record of p's run on c from dir (see
// Options.StateDir); nil when there is none, or only a reset one.
func ReadRunRecord(dir string, c *Cluster, p *plan.Plan) (*group.RunRecord, error) {
	r, err := group.ReadRecord(dir, c.id(), p)
	if err != nil || !r.Progress() {
		return nil, err
	}
	return r, nil
}

// recordsRuns reports whether a job of schedule interval iv keeps a
// local run record: a plain run of a plan without a schedule, with a
// state directory.
func (o *Options) recordsRuns(iv *plan.Interval) bool {
	return o.StateDir != "" && iv == nil && !o.Join
}

// saveRecord writes the job's run record in state, with next(r) as each
// range's committed offset. A record that cannot be written costs a
// warning: the run itself is not at risk, only the refusal of a later run
// whose group lost its commits.
func (j *Job) saveRecord(state string, next func(Range) int64) {
	if !j.opts.recordsRuns(j.Interval) {
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
	r, err := group.ReadRecord(dir, c.id(), p)
	if err != nil || r == nil {
		r = &group.RunRecord{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Topic: p.Source.Topic, ClusterID: c.id()}
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
