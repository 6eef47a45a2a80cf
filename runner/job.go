package runner

import (
	"cmp"
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
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
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
	// Prepare runs exactly its ranges instead of resolving the window again.
	Pinned *Resolution
	// ProgressEvery is the interval of progress log lines; default 10 s;
	// negative for none (the caller shows Job.Progress itself).
	ProgressEvery time.Duration
	// FlushTimeout bounds the last write and commit after an interruption;
	// default 1 minute.
	FlushTimeout time.Duration
	// Retry tunes the backoff of sink writes failing with a transient
	// error; the plan's sink.retry.max_elapsed bounds how long.
	Retry worker.Backoff
	// SourceRetry tunes how broker calls to the source cluster are retried;
	// its MaxElapsed is ignored: the plan's retry.max_elapsed sets it.
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
	// (group.RunRecord): a run whose group lost its commits while a record
	// says the plan made progress is refused instead of starting over.
	StateDir string
	// ResumeFromSink continues a plan whose group lost its commits from the
	// sink's own checkpoints (sinks.CheckpointStore) instead of refusing.
	ResumeFromSink bool
	// Hold, when set, is this process's hold on the plan's group
	// (HoldGroup): the commits carry its generation, and Run stops with
	// group.ErrHoldLost when it ends.
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
	o.ProgressEvery = cmp.Or(o.ProgressEvery, 10*time.Second)
	o.FlushTimeout = cmp.Or(o.FlushTimeout, time.Minute)
	o.Heartbeat = cmp.Or(o.Heartbeat, time.Second)
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
	// Interval is the schedule interval the job replays; nil without a
	// schedule. Its start goes into every commit's metadata.
	Interval *plan.Interval
	// dec is the plan's decoder once a run built it, kept for all its runs.
	dec *decode.Decoder
	// committed holds, per partition of a resumed run, the group's
	// checkpoint when it was prepared (Resume may be later: records lost).
	committed map[int32]held
	// discarded lists partitions holding checkpoints of an earlier run that
	// Restart discards: Run deletes those the new ranges do not overwrite.
	discarded []int32
	// record is the local record of the plan's run, nil without one;
	// checkSink asks Run to refuse a fresh run the sink's checkpoint table
	// records progress of; fromSink is ResumeFromSink without commits.
	record              *group.RunRecord
	checkSink, fromSink bool

	c    *Cluster
	opts Options
	// live is the running (or last) run's counters, for Progress.
	live atomic.Pointer[liveRun]
	// commits commits the running (or last) run's offsets to the group.
	commits atomic.Pointer[group.Committer]
	// topicID is the topic's ID when the job was prepared (KIP-516); ""
	// when the brokers report none.
	topicID string
}

// held is a partition's checkpoint: its offset and the durable positions
// (sinks.Positioner; 0: unknown) of the sink, pos[0], and dead-letter sink.
type held struct {
	offset int64
	pos    [2]int64
}

// resumeAt resumes partition part from its checkpoint cp.
func (j preparing) resumeAt(part int32, cp group.Checkpoint) {
	j.Resume[part], j.committed[part] = cp.Offset, held{cp.Offset, [2]int64{cp.Position, cp.DeadLetterPosition}}
}

// NothingToDo reports whether every partition already reached its end.
func (j *Job) NothingToDo() bool {
	return !slices.ContainsFunc(j.Resolution.Ranges, func(r Range) bool { return j.readFrom(r) < r.End })
}

// readFrom is where partition r is read from: its resume point, else its
// range start.
func (j *Job) readFrom(r Range) int64 {
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

// addedSince lists the partitions created since the job was resolved
// and warns about the new ones; a failed metadata request costs only that.
func (j ending) addedSince(ctx context.Context) []int32 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	all, err := j.c.FreshPartitions(ctx, j.Resolution.Topic)
	if err != nil {
		j.opts.Log.Debug().Err(err).Msg("list partitions after the run")
		return j.Added
	}
	j.warnAdded(slices.DeleteFunc(addedAmong(j.Plan, j.Resolution, all), func(p int32) bool { return slices.Contains(j.Added, p) }))
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
// created again meanwhile is an *group.IncarnationError.
func (j ending) checkSameTopic(ctx context.Context) error {
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

// liveRun is the counters of the running (or last) run, for Progress.
type liveRun struct {
	started time.Time
	states  []*worker.State
	sink    sinks.Sink // nil before the run opened it
}

// SourceClusterID is the source cluster's id (Metadata's ClusterID), where
// the runner commits the replay group's offsets; "" when unknown
// (sinks.Options.SourceClusterID).
func (j *Job) SourceClusterID() string { return j.c.id() }

// meta is the metadata of a commit of the range [start, end), with the
// sinks' durable positions pos and dpos (0: unknown).
func (j *Job) meta(start, end, pos, dpos int64) group.Meta {
	m := group.Meta{Tool: group.MetaTool, Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Start: start, End: end, Pos: pos, DPos: dpos, Tid: j.Resolution.TopicID}
	if j.Interval != nil {
		m.Iv = j.Interval.Start.UTC().Format(time.RFC3339)
	}
	return m
}

// newState is the worker's state of range r of topic, read from from.
func newState(topic string, r Range, from int64) *worker.State {
	return &worker.State{TopicPartition: record.TopicPartition{Topic: topic, Partition: r.Partition}, Start: r.Start, End: r.End, From: from}
}

// newStates are the workers' states of res's ranges, each read from from(r).
func newStates(res *Resolution, from func(Range) int64) []*worker.State {
	states := make([]*worker.State, len(res.Ranges))
	for i, r := range res.Ranges {
		states[i] = newState(res.Topic, r, from(r))
	}
	return states
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

// holderID is the client ID of the hold's member, "" without a hold.
func (o *Options) holderID() string {
	if o.Hold == nil {
		return ""
	}
	return o.Hold.ClientID()
}
