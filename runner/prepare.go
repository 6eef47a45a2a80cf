package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// Prepare decides what a run of p would do, without changing anything
// (a window that retention cut is a *CutError, returned with the job that
// shows its ranges, which must not run):
// it refuses (*fault.SafetyError) a group with active members, with commits not
// made by replay, or with another plan's checkpoints (unless
// opts.Restart); it resumes from this plan's checkpoints with the ranges
// fixed by the first run; otherwise it resolves the window afresh, or
// takes the ranges of opts.Pinned.
func Prepare(ctx context.Context, c *Cluster, p *plan.Plan, opts Options) (*Job, error) {
	opts.defaults()
	applyRetry(c, p, opts)
	member := opts.holderID()
	if opts.Join {
		member = group.JoinClientID(p.Fingerprint())
	}
	if err := c.checkRunnable(ctx, p, member); err != nil {
		return nil, err
	}
	all, cps, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, err
	}
	topicID, err := c.TopicID(ctx, p.Source.Topic)
	if err != nil {
		return nil, err
	}
	job := &Job{Plan: p, c: c, opts: opts, topicID: topicID}
	if opts.recordsRuns(nil) {
		if job.record, err = group.ReadRecord(opts.StateDir, job.SourceClusterID(), p); err != nil {
			if !opts.Restart { // checkpoints of another incarnation are refused first
				if ierr := group.CheckIncarnation(p, cps, topicID); ierr != nil {
					return nil, ierr
				}
			}
			return nil, err
		}
	}
	kind, err := decideStart(startFacts{plan: p, cps: cps, topicID: topicID, record: job.record,
		restart: opts.Restart, join: opts.Join, resumeFromSink: opts.ResumeFromSink, pinned: opts.Pinned != nil})
	if err != nil {
		return nil, err
	}
	switch kind {
	case startPinned:
		err := (preparing{job}).pin(ctx, all, cps)
		if err == nil && job.Fresh {
			err = (preparing{job}).withoutCommits()
		}
		return job, err
	case startResume:
		if err := (preparing{job}).resume(ctx, all, cps); err != nil {
			return job, err
		}
		return job, (preparing{job}).partlyLost(ctx, cps)
	case startFromRecord:
		return job, (preparing{job}).fromRecord(ctx, all)
	}
	job.Resolution, err = Resolve(ctx, c, p, opts.logicalNow())
	if _, cut := errors.AsType[*CutError](err); err != nil && !cut {
		return nil, err
	}
	job.Fresh, job.Ignored = true, job.Resolution.Unselected
	if err != nil {
		return job, err // it cannot run; its ranges show where retention cut the window
	}
	job.Resolution.logDetails(opts.Log)
	job.discarded = group.ReplayCommitted(all, cps)
	if !group.AnyCommit(cps) {
		if err := (preparing{job}).withoutCommits(); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// resume rebuilds the ranges from the checkpoints of an earlier run.
func (j preparing) resume(ctx context.Context, all []int32, cps map[int32]group.Checkpoint) error {
	p := j.Plan
	var parts []int32
	for _, part := range all {
		if cp := cps[part]; cp.Replay && cp.Offset >= 0 {
			parts = append(parts, part)
		} else {
			j.Ignored = append(j.Ignored, part)
		}
	}
	offs, err := j.c.ListOffsets(ctx, p.Source.Topic, parts, p.Source.Isolation)
	if err != nil {
		return err
	}
	j.Resolution = &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: p.Source.Topic, TopicID: j.topicID, Group: p.Group, ResolvedAt: j.opts.Now().UTC()}
	j.Resume, j.committed = map[int32]int64{}, map[int32]held{}
	// Ranges a run of several topics pinned but never reached start afresh:
	// what a sink kept of an earlier run (its checkpoints) is not this run's.
	j.Fresh = len(parts) > 0
	for _, part := range parts {
		cp, o := cps[part], offs[part]
		j.Fresh = j.Fresh && cp.Pinned
		j.resumeAt(part, cp)
		rg := Range{Partition: part, Start: cp.Start, End: cp.End, Outcome: Resumed, LogStart: o.LogStart, HighWatermark: o.HighWatermark, LastStable: o.LastStable}
		if err := j.checkResumeStart(&rg); err != nil {
			return err
		}
		if j.Resume[part] < rg.End {
			j.c.noteOpenTransaction(ctx, p, &rg)
		}
		j.Resolution.Ranges = append(j.Resolution.Ranges, rg)
	}
	j.warnAdded(addedAmong(j.Plan, j.Resolution, j.Ignored))
	return nil
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
	res := &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: p.Source.Topic, TopicID: j.topicID, Group: p.Group, ResolvedAt: rec.ResolvedAt}
	outcome := Resumed
	if j.opts.Restart {
		outcome = InRange
	}
	for _, r := range rec.Ranges {
		if !slices.Contains(all, r.Partition) {
			return fmt.Errorf("the run record %s has partition %s/%d, which the topic no longer has (it has %d partitions): was it deleted and created again? Remove the record to resolve the window afresh", rec.Path(), p.Source.Topic, r.Partition, len(all))
		}
		res.Ranges = append(res.Ranges, Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: outcome})
	}
	j.Fresh, j.fromSink = j.opts.Restart, !j.opts.Restart
	if err := j.fixRanges(ctx, all, res, nil); err != nil {
		return err
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
	var rgs []Range
	for _, r := range rec.Ranges {
		if cp, ok := cps[r.Partition]; ok && cp.Offset >= 0 {
			if cp.Start != r.Start || cp.End != r.End {
				return nil
			}
			continue
		}
		missing, rgs = append(missing, r), append(rgs, Range{Partition: r.Partition, Start: r.Start, End: r.End, Outcome: Resumed})
	}
	if len(missing) == 0 {
		return nil
	}
	if !j.opts.ResumeFromSink {
		return group.RecordRefusal(j.Plan, j.record, missing)
	}
	if err := j.pinRanges(ctx, rgs, nil); err != nil {
		return err
	}
	j.Resolution.Ranges = append(j.Resolution.Ranges, rgs...)
	drop := func(p int32) bool { return slices.ContainsFunc(rgs, func(rg Range) bool { return rg.Partition == p }) }
	j.Ignored, j.Added = slices.DeleteFunc(j.Ignored, drop), slices.DeleteFunc(j.Added, drop)
	slices.SortFunc(j.Resolution.Ranges, func(a, b Range) int { return cmp.Compare(a.Partition, b.Partition) })
	j.fromSink = true
	return nil
}
