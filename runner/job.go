package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
)

// ErrInterrupted is returned (wrapped) by Job.Run when its context was
// cancelled (a signal): the in-flight batch was written and committed, and
// re-running the same plan resumes from there.
var ErrInterrupted = worker.ErrInterrupted

// SignalTime is how soon after the first signal (SIGINT, SIGTERM) a run
// ends, even with a sink that hangs (worker.SignalTime).
const SignalTime = worker.SignalTime

// Options changes how a plan is prepared and run.
type Options struct {
	// Log receives progress and diagnostics; default zerolog.Nop().
	Log zerolog.Logger
	// Now is the clock for relative windows; default time.Now.
	Now func() time.Time
	// At, when set, is the logical now: relative windows and schedules are
	// evaluated as if it were At (a scheduler's logical date), while Now
	// still times the run.
	At time.Time
	// Restart discards another plan's checkpoints in the group and starts
	// over with a fresh resolution (the command asks for confirmation).
	Restart bool
	// Pinned, when set, is a resolution fixed earlier (replay plan --out):
	// Prepare runs exactly its ranges instead of resolving the window again
	// (see pin.go for what it refuses).
	Pinned *Resolution
	// ProgressEvery is the interval of progress log lines; default 10 s;
	// negative for none (the caller shows Job.Progress itself).
	ProgressEvery time.Duration
	// FlushTimeout bounds the last write and commit after an interruption;
	// default 1 minute.
	FlushTimeout time.Duration
	// Retry tunes the backoff of sink writes failing with a transient
	// error; the plan's sink.retry.max_elapsed (dead_letter.retry for the
	// dead-letter sink) bounds how long they are retried.
	Retry worker.Backoff
	// SourceRetry tunes how broker calls to the source cluster are retried
	// (request timeout, settle delay, backoff; source.RetryPolicy's
	// defaults when zero). Its MaxElapsed is ignored: the plan's
	// retry.max_elapsed sets it.
	SourceRetry source.RetryPolicy
	// Join prepares a run that joins the replay group with other processes
	// of the same plan (RunJoined): the group may have members, as long as
	// they are all such processes, and the ranges must be fixed already
	// (the group's checkpoints of this plan, or Pinned).
	Join bool
	// Heartbeat is a joined member's heartbeat interval: how soon it sees a
	// rebalance. Default 1 s.
	Heartbeat time.Duration
	// StateDir, when set, is where plain runs keep their local run records
	// (group.RunRecord, under StateDir/runs): a run whose group lost its commits
	// while a record says the plan made progress is refused
	// (*group.ExpiredError in a *fault.SafetyError) instead of starting over.
	StateDir string
	// ResumeFromSink continues a plan whose group lost its commits from the
	// sink's own checkpoints (sinks.CheckpointStore) instead of refusing,
	// with the ranges the run record (or Pinned) fixed; Restart starts over
	// instead.
	ResumeFromSink bool
	// Hold, when set, is this process's hold on the plan's group
	// (HoldGroup): the group may have this process as its member, the
	// commits carry its generation, and Run stops with group.ErrHoldLost when it
	// ends.
	Hold *group.Hold
}

// logicalNow is At when set, else Now().
func (o *Options) logicalNow() time.Time {
	if !o.At.IsZero() {
		return o.At
	}
	return o.Now()
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 10 * time.Second
	}
	if o.FlushTimeout == 0 {
		o.FlushTimeout = time.Minute
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = time.Second
	}
}

// Job is a plan bound to fixed ranges, ready to run: either a fresh
// resolution or the ranges of an interrupted run found in the group's
// checkpoints.
type Job struct {
	Plan       *plan.Plan
	Resolution *Resolution
	// Resume holds, per partition, the offset to continue from (the
	// committed offset); absent partitions start at their range start.
	Resume map[int32]int64
	// Fresh is true when no run of this plan has committed yet.
	Fresh bool
	// Ignored lists partitions of the topic that are not part of the run
	// (not selected, or added after the run was resolved).
	Ignored []int32
	// DeadLetters receives the records that cannot be processed under
	// on_error: dead_letter; when nil, Run opens the plan's dead_letter sink.
	DeadLetters sinks.Sink
	// Added lists the ignored partitions that the plan selects but that
	// were created after the run was resolved.
	Added []int32
	// Interval is the schedule interval the job replays (a plan with a
	// schedule window); nil otherwise. Its start goes into every commit's
	// metadata.
	Interval *plan.Interval
	// dec is the plan's decoder once a run built it (decoder), kept for
	// the job's runs so that its counts cover them all (Report.Schemas).
	dec *decode.Decoder
	// committed holds, per partition of a resumed run, the offset the group
	// held when it was prepared: the sink of an earlier process made the
	// records below it durable (checkResume). Resume may be later (records
	// lost to retention are skipped).
	committed map[int32]int64
	// positions holds, per partition of a resumed run, the sink's durable
	// position recorded with its commit (sinks.Positioner), when known;
	// dlPositions the dead-letter sink's.
	positions, dlPositions map[int32]int64
	// discarded lists partitions holding checkpoints of an earlier run that
	// Restart discards: Run deletes those the new ranges do not overwrite,
	// or they would make every later run of this plan look like a changed plan.
	discarded []int32
	// record is the local record of the plan's run (Options.StateDir), nil
	// without one; checkSink asks Run to refuse a fresh run when the sink's
	// checkpoint table records progress of it (the group lost its commits);
	// fromSink is Options.ResumeFromSink for a group without commits.
	record              *group.RunRecord
	checkSink, fromSink bool

	c    *Cluster
	opts Options
	// live is the running (or last) run's counters, for Progress.
	live atomic.Pointer[liveRun]
	// commits commits the running (or last) run's offsets to the group
	// (group.Committer), as the member the job has there.
	commits atomic.Pointer[group.Committer]
	// topicID is the topic's ID when the job was prepared (KIP-516); ""
	// when the brokers report none.
	topicID string
}

// NothingToDo reports whether every partition already reached its end.
func (j *Job) NothingToDo() bool {
	for _, r := range j.Resolution.Ranges {
		if j.from(r) < r.End {
			return false
		}
	}
	return true
}

func (j *Job) from(r Range) int64 {
	if off, ok := j.Resume[r.Partition]; ok {
		return off
	}
	return r.Start
}

// RunID identifies the resolved run: the plan fingerprint and the fixed
// ranges. Sinks that stage output use it to discard another run's staging.
func (j *Job) RunID() string {
	h := sha256.New()
	fmt.Fprint(h, j.Resolution.Fingerprint)
	for _, r := range j.Resolution.Ranges {
		fmt.Fprintf(h, "|%d:%d-%d", r.Partition, r.Start, r.End)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// applyRetry makes c's broker calls retry as p's retry section says, with
// opts.SourceRetry's tuning.
func applyRetry(c *Cluster, p *plan.Plan, opts Options) {
	if c == nil || c.Cluster == nil {
		return
	}
	rp := opts.SourceRetry
	rp.MaxElapsed = time.Duration(p.Retry.MaxElapsed)
	c.SetRetry(rp)
}

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
	all, cps, err := c.gatherStart(ctx, p, member)
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

// selects reports whether p reads partition part of its topic.
func selects(p *plan.Plan, part int32) bool {
	switch {
	case p.Window.Kind() == plan.WindowOffsets && p.Window.OffsetsAll == nil: // an offsets window names its partitions
		_, ok := p.Window.Offsets[part]
		return ok
	case p.Source.Partitions.All || len(p.Source.Partitions.List) == 0:
		return true
	}
	return slices.Contains(p.Source.Partitions.List, part)
}

// addedAmong returns the partitions of parts that p selects and that
// have no range in res: they were created after the ranges were resolved.
func addedAmong(p *plan.Plan, res *Resolution, parts []int32) []int32 {
	var added []int32
	for _, part := range parts {
		if _, ok := res.rangeOf(part); selects(p, part) && !ok {
			added = append(added, part)
		}
	}
	return added
}

// addedSince lists the partitions created while the job ran (or since it
// was resolved), in addition to j.Added, and warns about the new ones.
// The run never reads them: the ranges are fixed. A failed metadata
// request only costs the warning.
func (j *Job) addedSince(ctx context.Context) []int32 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	all, err := j.c.FreshPartitions(ctx, j.Resolution.Topic)
	if err != nil {
		j.opts.Log.Debug().Err(err).Msg("list partitions after the run")
		return j.Added
	}
	var fresh []int32
	for _, part := range addedAmong(j.Plan, j.Resolution, all) {
		if !slices.Contains(j.Added, part) {
			fresh = append(fresh, part)
		}
	}
	j.warnAdded(fresh)
	return slices.Sorted(slices.Values(j.Added))
}

func (j *Job) warnAdded(added []int32) {
	if len(added) == 0 {
		return
	}
	j.Added = append(j.Added, added...)
	j.opts.Log.Warn().Str("plan", j.Plan.Name).Str("topic", j.Resolution.Topic).Ints32("partitions", added).
		Msg("partitions were added to the topic after the run was resolved: this run does not read them (the ranges are fixed); replay them with another plan if the window needs them")
}

// Discarded lists the partitions whose checkpoints of an earlier run the
// job discards when it runs (Options.Restart): the command asks first.
func (j *Job) Discarded() []int32 { return slices.Clone(j.discarded) }

// checkSameTopic re-reads the topic's ID at the end of a run: a topic
// deleted and created again while the run read it is an
// *group.IncarnationError, before anything is published.
func (j *Job) checkSameTopic(ctx context.Context) error {
	if j.Resolution.TopicID == "" {
		return nil
	}
	id, err := j.c.TopicID(ctx, j.Resolution.Topic)
	if err != nil {
		return fmt.Errorf("check the topic's ID at the end of the run: %w", err)
	}
	if id != "" && id != j.Resolution.TopicID {
		return (&group.IncarnationError{Topic: j.Resolution.Topic, Group: j.Plan.Group, Recorded: j.Resolution.TopicID, Now: id,
			Where: "this run resolved its ranges (during the run: records of both may have reached the sink, and nothing was published)"}).Refuse()
	}
	return nil
}
