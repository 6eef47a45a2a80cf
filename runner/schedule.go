package runner

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// ScheduleState is where a plan with a schedule window stands in its
// replay group, read from the commits' metadata (the interval each range
// belongs to): the same answer on every machine and for every tool.
type ScheduleState struct {
	// Last is the latest interval whose every partition reached its end;
	// nil when none has.
	Last *plan.Interval `json:"last_done,omitempty"`
	// Running is the interval a run started and did not finish (a crash,
	// an interruption, a run in progress); nil when there is none.
	Running *plan.Interval `json:"running,omitempty"`
	// Ranges are the ranges the commits record for Running, or for Last
	// when nothing runs; Committed the next offset per partition.
	Ranges    []Range         `json:"ranges,omitempty"`
	Committed map[int32]int64 `json:"committed,omitempty"`
	// Next is the first interval not done: Running, or the one after Last.
	Next plan.Interval `json:"next"`
	// NextDue is when Next becomes due (its end plus the delay).
	NextDue time.Time `json:"next_due"`
	// Due is how many intervals are due and not done at the time given.
	Due int `json:"due"`
}

// scheduleState decodes the schedule's progress from the group's
// checkpoints cps of this plan (fingerprint fp).
func scheduleState(p *plan.Plan, cps map[int32]group.Checkpoint, fp string, now time.Time) *ScheduleState {
	w := p.Window
	st := &ScheduleState{Committed: map[int32]int64{}}
	var latest time.Time
	for _, cp := range cps {
		if cp.Replay && cp.Offset >= 0 && cp.Fingerprint == fp && cp.Interval.After(latest) {
			latest = cp.Interval
		}
	}
	if latest.IsZero() {
		st.Next = w.FirstInterval()
	} else {
		cur, _ := w.IntervalAt(latest)
		done := true
		for _, part := range slices.Sorted(maps.Keys(cps)) {
			cp := cps[part]
			if !cp.Replay || cp.Offset < 0 || cp.Fingerprint != fp || !cp.Interval.Equal(latest) {
				continue
			}
			st.Ranges = append(st.Ranges, Range{Partition: part, Start: cp.Start, End: cp.End, Outcome: Resumed})
			st.Committed[part] = cp.Offset
			done = done && cp.Done()
		}
		if done {
			st.Last, st.Next = &cur, w.NextInterval(cur)
		} else {
			st.Running, st.Next = &cur, cur
		}
	}
	st.NextDue = w.DueAt(st.Next)
	for iv := st.Next; w.Due(iv, now) && st.Due < 1_000_000; iv = w.NextInterval(iv) {
		st.Due++
	}
	return st
}

// Schedule reads where p's schedule stands in its replay group at now. It
// never commits.
func (c *Cluster) Schedule(ctx context.Context, p *plan.Plan, now time.Time) (*ScheduleState, error) {
	_, cps, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, err
	}
	return scheduleState(p, cps, p.Fingerprint(), now), nil
}

// PrepareScheduled prepares the oldest interval of p's schedule that is
// due at the logical now (Options.At, else Now) and not done: the interval a run left unfinished
// (resumed with its recorded ranges), or the one after the last finished
// one. Each partition's range starts where the previous interval's ended
// (its committed end), so consecutive intervals are contiguous in offsets;
// it ends at the first offset stamped at or after the interval's end
// (ListOffsets by timestamp), or the last stable offset when no record is
// that late. The first interval starts at the first offset stamped at or
// after the schedule's start. It returns a nil Job when no interval is
// due, with the state saying when the next one is. The group checks are
// Prepare's (checkpoints made on another incarnation of the topic too,
// unless Restart); with Options.Hold, the group's member is this process.
func PrepareScheduled(ctx context.Context, c *Cluster, p *plan.Plan, opts Options) (*Job, *ScheduleState, error) {
	opts.defaults()
	if err := c.checkRunnable(ctx, p, opts.holderID()); err != nil {
		return nil, nil, err
	}
	all, cps, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, nil, err
	}
	if _, err := group.Classify(p, cps, opts.Restart); err != nil {
		return nil, nil, err
	}
	topicID, err := c.TopicID(ctx, p.Source.Topic)
	if err != nil {
		return nil, nil, err
	}
	if !opts.Restart {
		if err := group.CheckIncarnation(p, cps, topicID); err != nil {
			return nil, nil, err
		}
	}
	job := &Job{Plan: p, c: c, opts: opts, topicID: topicID}
	if opts.Restart {
		job.discarded = group.ReplayCommitted(all, cps)
		cps = map[int32]group.Checkpoint{}
	}
	now := opts.logicalNow()
	st := scheduleState(p, cps, p.Fingerprint(), now)
	if !p.Window.Due(st.Next, now) {
		return nil, st, nil
	}
	iv := st.Next
	job.Interval = &iv
	if err := (preparing{job}).intervalRanges(ctx, all, cps); err != nil {
		return nil, nil, err
	}
	return job, st, nil
}

// intervalRanges fixes the ranges of j.Interval: the ranges its commits
// record where there are any, the contiguous continuation of the previous
// interval elsewhere.
func (j preparing) intervalRanges(ctx context.Context, all []int32, cps map[int32]group.Checkpoint) error {
	p, iv := j.Plan, *j.Interval
	topic := p.Source.Topic
	selected, unselected, err := selectPartitions(p, all)
	if err != nil {
		return err
	}
	offs, err := j.c.ListOffsets(ctx, topic, selected, p.Source.Isolation)
	if err != nil {
		return err
	}
	ends, err := j.c.OffsetsAt(ctx, topic, selected, iv.End, p.Source.Isolation)
	if err != nil {
		return err
	}
	fp := p.Fingerprint()
	var lookup []int32 // partitions without a previous interval: start by time
	for _, part := range selected {
		if cp := cps[part]; !(cp.Replay && cp.Offset >= 0 && cp.Fingerprint == fp) {
			lookup = append(lookup, part)
		}
	}
	starts := map[int32]int64{}
	if len(lookup) > 0 {
		// A partition without checkpoints while others have them (added to
		// the topic, or newly selected, after the schedule started) starts
		// at the schedule's start: from iv.Start, its records of the earlier
		// intervals would belong to none.
		from := iv.Start
		if len(lookup) < len(selected) {
			from = p.Window.FirstInterval().Start
		}
		if starts, err = j.c.OffsetsAt(ctx, topic, lookup, from, p.Source.Isolation); err != nil {
			return err
		}
	}
	j.Resolution = &Resolution{Plan: p.Name, Fingerprint: fp, Topic: topic, TopicID: j.topicID, Group: p.Group, ResolvedAt: j.opts.Now().UTC(),
		From: iv.Start, To: iv.End, Unselected: unselected}
	j.Ignored, j.Fresh = unselected, true
	j.Resume, j.committed = map[int32]int64{}, map[int32]held{}
	for _, part := range selected {
		cp, o := cps[part], offs[part]
		rg := Range{Partition: part, Outcome: InRange, LogStart: o.LogStart, HighWatermark: o.HighWatermark, LastStable: o.LastStable}
		mine := cp.Replay && cp.Offset >= 0 && cp.Fingerprint == fp
		switch {
		case mine && cp.Interval.Equal(iv.Start): // this interval, resumed
			rg.Start, rg.End, rg.Outcome = cp.Start, cp.End, Resumed
			j.resumeAt(part, cp)
			j.Fresh = false
		case mine: // the previous interval's end (its next offset)
			rg.Start = cp.Offset
			rg.End = intervalEnd(ends, part, rg.Start, o.LastStable)
		default:
			rg.Start = intervalEnd(starts, part, 0, o.LastStable)
			rg.End = intervalEnd(ends, part, rg.Start, o.LastStable)
		}
		if err := j.checkResumeStart(&rg); err != nil {
			return err
		}
		if o.HighWatermark == o.LogStart {
			rg.Outcome = EmptyPartition
		}
		j.Resolution.Ranges = append(j.Resolution.Ranges, rg)
	}
	return nil
}

// intervalEnd is the ListOffsets answer for a partition (-1: no record is
// that late, so the last stable offset), never below floor nor above the
// last stable offset.
func intervalEnd(answers map[int32]int64, part int32, floor, lastStable int64) int64 {
	end, ok := answers[part]
	if !ok || end < 0 || end > lastStable {
		end = lastStable
	}
	return max(end, floor)
}

// checkResumeStart refuses a range whose next offset retention already
// deleted, unless the plan accepts data loss (then it starts at the log
// start and counts the loss).
func (j preparing) checkResumeStart(rg *Range) error {
	next := j.readFrom(*rg)
	if next >= rg.End || next >= rg.LogStart {
		return nil
	}
	if !j.Plan.AllowDataLoss {
		return &RetentionError{Topic: j.Plan.Source.Topic, Partition: rg.Partition, Start: next, LogStart: rg.LogStart}
	}
	rg.Lost = min(rg.LogStart, rg.End) - next
	if _, ok := j.Resume[rg.Partition]; ok {
		j.Resume[rg.Partition] = min(rg.LogStart, rg.End)
	} else {
		rg.Start = min(rg.LogStart, rg.End)
		rg.Outcome = StartBeforeRetention
	}
	return nil
}

// IntervalGroup is the replay group in which a re-run of one interval
// (PrepareInterval) keeps its own checkpoints, apart from the schedule's
// progress: the plan's group with the interval's start appended.
func IntervalGroup(group string, iv plan.Interval) string {
	return group + ".interval-" + iv.Start.UTC().Format("20060102T150405Z")
}

// PrepareInterval prepares a re-run of the interval of p's schedule that
// contains at (or starts at it), without touching the schedule's progress:
// it runs under IntervalGroup, where it is resumable like any run. The
// ranges are those the schedule's commits record when the interval is the
// schedule's latest; otherwise the offsets stamped at or after the
// interval's start and end (ListOffsets by timestamp), which are the ones
// the schedule replayed unless no record was that late when it ran. The
// interval must be due at opts.Now.
func PrepareInterval(ctx context.Context, c *Cluster, p *plan.Plan, at time.Time, opts Options) (*Job, error) {
	opts.defaults()
	iv, ok := p.Window.IntervalAt(at)
	if !ok {
		return nil, &IntervalError{At: at, Reason: fmt.Sprintf("it is before the schedule's start, %s", p.Window.FirstInterval().Start.Format(time.RFC3339))}
	}
	if now := opts.logicalNow(); !p.Window.Due(iv, now) {
		return nil, &IntervalError{At: at, Reason: fmt.Sprintf("its interval %s is not due until %s", iv, p.Window.DueAt(iv).Format(time.RFC3339))}
	}
	if err := group.CheckRunnable(ctx, c.Cluster, p); err != nil {
		return nil, err
	}
	all, main, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, err
	}
	rp := *p
	rp.Group = IntervalGroup(p.Group, iv)
	if err := group.CheckIdle(ctx, c.Cluster, rp.Group); err != nil {
		return nil, err
	}
	own, err := c.Checkpoints(ctx, rp.Group, p.Source.Topic, all)
	if err != nil {
		return nil, err
	}
	if _, err := group.Classify(&rp, own, true); err != nil {
		return nil, err
	}
	topicID, err := c.TopicID(ctx, p.Source.Topic)
	if err != nil {
		return nil, err
	}
	if err := cmp.Or(group.CheckIncarnation(p, main, topicID), group.CheckIncarnation(&rp, own, topicID)); err != nil {
		return nil, err
	}
	job := &Job{Plan: &rp, c: c, opts: opts, Interval: &iv, topicID: topicID}
	fp := rp.Fingerprint()
	resumable := slices.ContainsFunc(slices.Collect(maps.Values(own)), func(cp group.Checkpoint) bool {
		return cp.Replay && cp.Offset >= 0 && cp.Fingerprint == fp && cp.Interval.Equal(iv.Start) && !cp.Done()
	})
	cps := own // an interrupted re-run
	if !resumable {
		cps = map[int32]group.Checkpoint{}
		job.discarded = group.ReplayCommitted(all, own)
		// The schedule's own ranges of this interval, when it recorded them.
		for part, cp := range main {
			if cp.Replay && cp.Fingerprint == p.Fingerprint() && cp.Interval.Equal(iv.Start) {
				cp.Fingerprint, cp.Offset = fp, cp.Start
				cps[part] = cp
			}
		}
	}
	if err := (preparing{job}).intervalRanges(ctx, all, cps); err != nil {
		return nil, err
	}
	if !resumable {
		job.Fresh, job.Resume, job.committed = true, map[int32]int64{}, map[int32]held{}
	}
	return job, nil
}

// IntervalError reports an instant that names no interval a re-run can
// replay.
type IntervalError struct {
	At     time.Time
	Reason string
}

func (e *IntervalError) Error() string {
	return fmt.Sprintf("no interval to re-run at %s: %s", e.At.UTC().Format(time.RFC3339), e.Reason)
}
