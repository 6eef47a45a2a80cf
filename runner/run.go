package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
)

// Run replays the job's ranges into sink. Every partition is read by its
// own goroutine from its start (or checkpoint) to its end, throttled, and
// written in batches; after each batch the sink made durable, the next
// offset is committed to the replay group with the plan fingerprint and the
// range end as metadata. When every partition is done, sink.Finish
// publishes the output.
//
// A run refused or failing before it reads anything (the sink cannot
// resume, a commit fails) returns a nil *Report. Cancelling ctx stops the
// run after the in-flight batch is written and committed; Run then returns
// an error wrapping ErrInterrupted. A failing
// partition stops the others the same way and Run returns its
// *PartitionError; nothing is ever committed past what the sink holds.
// With Options.Hold, the commits are the hold's member's, and a hold that
// ends stops the run with an error wrapping group.ErrHoldLost.
func (j *Job) Run(ctx context.Context, sink sinks.Sink) (*Report, error) {
	applyRetry(j.c, j.Plan, j.opts) // also for jobs prepared by the schedule
	if j.opts.Hold != nil {
		if err := (settling{Job: j}).dropDiscarded(ctx); err != nil {
			return nil, err
		}
	}
	j.c.sayRetries(j.opts.Log, j.Plan.Name)
	k, ctx, unhold := j.follow(ctx)
	defer unhold()
	rep, err := j.run(ctx, sink)
	if errors.Is(err, sinks.ErrLost) && fault.HintOf(err) == fault.HintNone {
		// A sink lost what it made durable (sinks.ErrLost): a resume
		// cannot bring it back, only a replay of the window.
		err = fault.With(err, fault.HintRestart)
	}
	if k.HoldLost() {
		err = errors.Join(group.ErrHoldLost, k.HoldLostCause(), err)
	}
	return rep, err
}

func (j *Job) run(ctx context.Context, sink sinks.Sink) (*Report, error) {
	rep := j.newReport()
	work := context.WithoutCancel(ctx)
	closeDeadLetters, err := j.openDeadLetters(work)
	if err != nil {
		return nil, err
	}
	defer closeDeadLetters()
	states, err := (settling{Job: j, sink: sink}).settle(work)
	if err != nil {
		return nil, err
	}
	j.saveRecord(group.RecordRunning, j.readFrom)
	next := func(r Range) int64 {
		if i := slices.IndexFunc(states, func(s *worker.State) bool { return s.Partition == r.Partition }); i >= 0 {
			return max(states[i].Next.Load(), states[i].From)
		}
		return j.readFrom(r)
	}
	j.live.Store(&liveRun{started: rep.Started, states: states, sink: sink}) // for Job.Progress
	rep.NothingToDo = j.NothingToDo()
	err = j.readAll(ctx, sink, states, j.Plan.Throttle)
	for i, s := range states {
		rep.Partitions = append(rep.Partitions, partitionReport(j.Resolution.Ranges[i], s))
	}
	end := ending{j}
	rep.Added = end.addedSince(work)
	end.finish(rep, sink)
	if err == nil {
		err = end.checkSameTopic(work)
	}
	if err == nil {
		ends := map[int32]partitionEnd{}
		for _, s := range states {
			ends[s.Partition] = partitionEnd{next: max(s.Next.Load(), s.From), pos: s.Pos.Load(), deadPos: s.DeadPos.Load()}
		}
		err = end.confirmCommits(work, sink, ends)
	}
	if err == nil {
		err = end.publish(work, sink, rep)
	}
	if err != nil {
		j.saveRecord(group.RecordStopped, next)
	} else {
		j.saveRecord(group.RecordDone, next)
	}
	return rep, err
}

// partitionEnd is where a partition ended: its next offset and the sinks'
// positions its last commit stored.
type partitionEnd struct{ next, pos, deadPos int64 }

// ending is a job's view for the end of a run: the checks after the
// reading, the commits' confirmation, the report and the publishing.
type ending struct{ *Job }

// confirmCommits reads the group's offsets back once every partition is
// done: a commit whose attempt timed out may have landed after a later
// one, leaving a partition's offset below its end, so that a re-run would
// take the finished plan for one in progress. Such a partition is
// committed again at its end. A sink that commits the group's offsets in
// its own transactions (the exactly-once kafka sink) is left alone: a
// standalone commit could move a fenced process's group.
func (j ending) confirmCommits(ctx context.Context, sink sinks.Sink, ends map[int32]partitionEnd) error {
	if sinks.CapabilitiesOf(sink).Offsets != nil || len(ends) == 0 {
		return nil
	}
	parts := slices.Sorted(maps.Keys(ends))
	cps, err := j.c.Checkpoints(ctx, j.Plan.Group, j.Resolution.Topic, parts)
	if err != nil {
		return fmt.Errorf("read back the group's offsets at the end of the run: %w", err)
	}
	offsets, meta := map[int32]int64{}, map[int32]group.Meta{}
	for _, r := range j.Resolution.Ranges {
		end, ok := ends[r.Partition]
		if !ok {
			continue
		}
		if got := cps[r.Partition].Offset; got < end.next {
			j.opts.Log.Warn().Int32("partition", r.Partition).Int64("committed", got).Int64("end", end.next).
				Msg("the group's offset is below where the partition ended (a commit landed late): committing the end again")
			offsets[r.Partition], meta[r.Partition] = end.next, j.meta(r.Start, r.End, end.pos, end.deadPos)
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := j.commits.Load().Commit(ctx, j.Resolution.Topic, offsets, meta); err != nil {
		return fmt.Errorf("commit the ends again in group %s: %w", j.Plan.Group, err)
	}
	return nil
}

// publish finishes the sink and the dead-letter sink once every partition
// is done (Sink.Finish: a file sink publishes its staging) and marks rep
// published. rep's finished is when the publication ended, published or
// failed: it is part of the run's time.
func (j ending) publish(work context.Context, sink sinks.Sink, rep *Report) error {
	defer func() { rep.Finished = j.opts.Now().UTC() }()
	fctx, cancel := context.WithTimeout(work, j.opts.FlushTimeout)
	defer cancel()
	const again = "every record is staged and committed: fix the cause and re-run the same command to publish"
	for _, t := range []struct {
		what string
		sink sinks.Sink
	}{{"sink output", sink}, {"the dead letters", j.DeadLetters}} {
		if t.sink == nil {
			continue
		}
		if err := t.sink.Finish(fctx); errors.Is(err, sinks.ErrLost) {
			return fault.With(fmt.Errorf("publish %s: %w", t.what, err), fault.HintRestart)
		} else if err != nil {
			return fmt.Errorf("publish %s: %w (%s)", t.what, err, again)
		}
	}
	rep.Published = true
	return nil
}

// newReport starts the report of a run of the job, now.
func (j *Job) newReport() *Report {
	return &Report{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Topic: j.Resolution.Topic, Group: j.Plan.Group,
		Sink: string(j.Plan.Sink.Type), Started: j.opts.Now().UTC(), Ignored: j.Ignored, From: j.Resolution.From, To: j.Resolution.To}
}

// Member returns the generation and member id this process has in the
// replay group while it runs joined (RunJoined), else -1 and ""
// (sinks.Options.Member).
func (j *Job) Member() (generation int32, memberID string) {
	if k := j.commits.Load(); k != nil {
		if m := k.Member(); m != nil {
			return m.Generation, m.ID
		}
	}
	return -1, ""
}

// CommitMetadata returns the metadata the runner commits to the replay
// group with the offset of partition (the plan, its fingerprint and the
// partition's range: JSON), for a sink that commits the group's offsets in
// its own transactions (sinks.Options.CommitMetadata); "" for a partition
// outside the job's ranges.
func (j *Job) CommitMetadata(partition int32) string {
	if r, ok := j.Resolution.rangeOf(partition); ok {
		return j.meta(r.Start, r.End, 0, 0).Encode()
	}
	return ""
}

// readAll replays states into sink under limit (the plan's throttle, or
// a joined member's share of it), one worker per partition
// (worker.RunAll), logging the progress.
func (j *Job) readAll(ctx context.Context, sink sinks.Sink, states []*worker.State, limit plan.Throttle) error {
	dec, err := j.decoder(ctx)
	if err != nil {
		return err
	}
	stop := j.progress(states)
	defer stop()
	return worker.RunAll(ctx, &worker.Policy{Plan: j.Plan, From: j.Resolution.From, To: j.Resolution.To, Decoder: dec,
		Sink: sink, DeadLetters: j.DeadLetters, Source: j.c.Cluster, Limit: limit, Retry: j.opts.Retry, FlushTimeout: j.opts.FlushTimeout, Log: j.opts.Log,
		Commit: func(ctx context.Context, s *worker.State, next, pos, deadPos int64) error {
			return j.commits.Load().CommitPartition(ctx, s.TopicPartition, next, j.meta(s.Start, s.End, pos, deadPos))
		}}, states)
}

// PinRanges records a fresh job's ranges in the replay group before it
// runs, as Run does first: each partition's start offset, with the range
// as commit metadata (after deleting the checkpoints of a discarded run,
// --restart, outside the new ranges). A plan of several topics pins every
// topic's ranges before it replays the first: a run that stops in one
// topic then resumes every topic with the ranges resolved when it first
// started, not a window resolved again. A resumed job's ranges are in the
// group already: PinRanges does nothing then.
func (j *Job) PinRanges(ctx context.Context) error {
	if !j.Fresh {
		return nil
	}
	applyRetry(j.c, j.Plan, j.opts)
	s := settling{Job: j, pin: true}
	if err := s.dropDiscarded(ctx); err != nil {
		return err
	}
	j.discarded = nil // dropped: Run has none left to drop
	_, ctx, unhold := j.follow(ctx)
	defer unhold()
	return s.commitStarts(ctx)
}

// follow makes the job's committer, which commits as the hold's member
// (Options.Hold) while ctx, cancelled when the hold ends, runs.
func (j *Job) follow(ctx context.Context) (*group.Committer, context.Context, context.CancelFunc) {
	k := group.NewCommitter(j.c.Cluster, j.opts.Hold, j.Plan.Group, len(j.Resolution.Ranges))
	j.commits.Store(k)
	ctx, unhold := k.Follow(ctx, j.opts.Log)
	return k, ctx, unhold
}
