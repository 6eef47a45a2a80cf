package runner

import (
	"context"
	"errors"

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
	if job.Resolution, err = Resolve(ctx, c, p, opts.logicalNow()); err != nil {
		if cut := (*CutError)(nil); errors.As(err, &cut) {
			// The job cannot run; its ranges show the reviewer where
			// retention cut the window.
			job.Fresh, job.Ignored = true, job.Resolution.Unselected
			return job, err
		}
		return nil, err
	}
	job.Resolution.logDetails(opts.Log)
	job.Fresh, job.Ignored = true, job.Resolution.Unselected
	for _, part := range all {
		if cp := cps[part]; cp.Replay && cp.Offset >= 0 {
			job.discarded = append(job.discarded, part)
		}
	}
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
	j.Resume, j.committed, j.positions, j.dlPositions = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	for _, part := range parts {
		cp, o := cps[part], offs[part]
		j.committed[part], j.positions[part], j.dlPositions[part] = cp.Offset, cp.Position, cp.DeadLetterPosition
		rg := Range{Partition: part, Start: cp.Start, End: cp.End, Outcome: Resumed, LogStart: o.LogStart, HighWatermark: o.HighWatermark, LastStable: o.LastStable}
		next := cp.Offset
		if next < rg.End && next < o.LogStart {
			if !p.AllowDataLoss {
				return &RetentionError{Topic: p.Source.Topic, Partition: part, Start: next, LogStart: o.LogStart}
			}
			rg.Lost = min(o.LogStart, rg.End) - next
			next = min(o.LogStart, rg.End)
		}
		j.Resume[part] = next
		if next < rg.End {
			j.c.noteOpenTransaction(ctx, p, &rg)
		}
		j.Resolution.Ranges = append(j.Resolution.Ranges, rg)
	}
	j.warnAdded(addedAmong(j.Plan, j.Resolution, j.Ignored))
	return nil
}
