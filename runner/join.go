package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
)

// joinDonePoll is how often a member whose partitions are done checks
// whether the other members finished theirs.
const joinDonePoll = time.Second

// joined is a Job running as one member of its replay group (RunJoined),
// with the run's sink and the partitions' reports of every generation.
type joined struct {
	*Job
	sink    sinks.Sink
	reports map[int32]*PartitionReport
}

// errAllDone ends a joined run: every partition of the plan reached its end.
var errAllDone = errors.New("every partition is done")

// RunJoined replays the job's ranges as one member of the plan's replay
// group, with other processes of the same plan on other machines (run
// --join): Kafka's group protocol spreads the partitions among
// the members, and when one leaves or dies (after the session timeout,
// 10 s), its partitions move to the others, which continue from its last
// commit. Each generation, the member reads its partitions from the
// group's checkpoints with the same workers as Run, and commits as a
// member of that generation: a member that lost a partition to a rebalance
// has its commits refused, never overwriting the new owner's. A member
// whose partitions are done stays in the group (to take over from a member
// that dies) until every partition of the plan is done; then it leaves,
// publishes (sink.Finish) and returns.
//
// The sink must not stage output locally (a file or SQLite sink would
// split the output across machines): RunJoined refuses a sinks.Resumer.
// Cancelling ctx finishes the in-flight batches, commits them, leaves the
// group and returns an error wrapping ErrInterrupted. A partition failing
// fails the member, which leaves the group; the others then meet the same
// failure or finish.
func (j *Job) RunJoined(ctx context.Context, sink sinks.Sink) (*Report, error) {
	if sink.Capabilities().Resumer != nil {
		return nil, &LocalOutputError{Sink: string(j.Plan.Sink.Type)}
	}
	rep := j.newReport()
	work := context.WithoutCancel(ctx)
	closeDeadLetters, err := j.openDeadLetters(work)
	if err != nil {
		return nil, err
	}
	defer closeDeadLetters()
	if sinks.CapabilitiesOf(j.DeadLetters).Resumer != nil {
		return nil, &LocalOutputError{Sink: string(j.Plan.DeadLetter.Type), DeadLetters: true}
	}
	j.commits.Store(group.NewCommitter(j.c.Cluster, j.opts.Hold, j.Plan.Group, len(j.Resolution.Ranges)))
	j.c.sayRetries(j.opts.Log, j.Plan.Name)
	jr := &joined{Job: j, sink: sink, reports: map[int32]*PartitionReport{}}
	if err := jr.pinJoined(work); err != nil {
		return nil, err
	}
	cg, err := j.c.Join(source.JoinConfig{Group: j.Plan.Group, Topic: j.Resolution.Topic, ClientID: group.JoinClientID(j.Resolution.Fingerprint),
		Heartbeat: j.opts.Heartbeat, SessionTimeout: group.JoinSessionTimeout, RebalanceTimeout: group.JoinRebalanceTimeout})
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	runErr := jr.memberOf(ctx, cg)
	j.commits.Load().SetMember(nil)
	cg.Close() // leave: the others take over at once
	for _, p := range slices.Sorted(maps.Keys(jr.reports)) {
		rep.Partitions = append(rep.Partitions, *jr.reports[p])
	}
	ending{j}.finish(rep, sink)
	if !errors.Is(runErr, errAllDone) {
		return rep, runErr
	}
	return rep, ending{j}.publish(work, sink, rep)
}

// runGeneration replays the partitions assigned to this member in one
// generation, from the group's checkpoints, until they are done or the
// generation ends (gctx: a rebalance) or ctx is cancelled (a signal). With
// its partitions done, it waits for the generation to end or for every
// partition of the plan to be done (errAllDone). It must not return early:
// a member whose generation function returns rejoins, which rebalances the
// whole group.
func (j *joined) runGeneration(ctx, gctx context.Context, mine []int32) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(gctx, cancel)
	defer stop()
	// outcome maps an error of this generation to what the member does
	// next: stop (a signal), rejoin (a rebalance, or a commit refused after
	// one: nil), or fail.
	outcome := func(err error) error {
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && errors.Is(err, ErrInterrupted):
			return err // readAll says what the in-flight batches became
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %v", ErrInterrupted, err)
		case gctx.Err() != nil, errors.Is(err, source.ErrFenced), errors.Is(err, sinks.ErrPartitionLost):
			return nil
		}
		return err
	}
	// Every member must be a process of this plan: a live consumer that
	// joined the group since (whose leader may even have assigned the
	// partitions) must not share the plan's partitions and checkpoints.
	if err := group.CheckMembers(rctx, j.c.Cluster, j.Plan.Group, group.JoinClientID(j.Resolution.Fingerprint)); err != nil {
		return outcome(err)
	}
	// Every partition's checkpoint: the throttle share is of the offsets
	// left in all of them.
	all := make([]int32, 0, len(j.Resolution.Ranges))
	for _, r := range j.Resolution.Ranges {
		all = append(all, r.Partition)
	}
	cps, err := j.c.Checkpoints(rctx, j.Plan.Group, j.Resolution.Topic, all)
	if err != nil {
		return outcome(err)
	}
	states, err := j.generationStates(mine, cps)
	if err != nil {
		return err
	}
	j.live.Store(&liveRun{started: time.Now(), states: states, sink: j.sink})
	// The plan's throttle is the whole group's: this member takes the share
	// of the plan's offsets left in the ranges it was assigned, anew at
	// every rebalance, so members of skewed partitions finish together.
	mineOffsets, allOffsets := j.Resolution.offsetsOf(states, cps)
	limit := throttleShare(j.Plan.Throttle, mineOffsets, allOffsets)
	if limit.Limited() {
		j.opts.Log.Info().Str("plan", j.Plan.Name).Int("assigned", len(states)).Int("partitions", len(j.Resolution.Ranges)).Int64("assigned_offsets", mineOffsets).
			Float64("records_per_second", limit.RecordsPerSecond).Int64("bytes_per_second", int64(limit.BytesPerSecond)).Msg("throttle share of this member")
	}
	err = j.readAll(rctx, j.sink, states, limit)
	moved := ctx.Err() == nil && (gctx.Err() != nil || errors.Is(err, source.ErrFenced) || errors.Is(err, sinks.ErrPartitionLost))
	mergeReports(j.reports, j.Resolution, states, moved)
	if err != nil {
		return outcome(err)
	}
	return j.awaitAllDone(ctx, gctx, rctx)
}

// generationStates are the partitions of mine to read in a generation,
// each from its checkpoint in the group; one of this plan for another
// range is a refusal (processes started with different resolutions).
func (j *joined) generationStates(mine []int32, cps map[int32]group.Checkpoint) ([]*worker.State, error) {
	var states []*worker.State
	for _, r := range j.Resolution.Ranges {
		if !slices.Contains(mine, r.Partition) {
			continue
		}
		cp := cps[r.Partition]
		ours := cp.Replay && cp.Fingerprint == j.Resolution.Fingerprint
		if ours && (cp.Start != r.Start || cp.End != r.End) {
			return nil, &fault.SafetyError{Group: j.Plan.Group, Hint: fault.HintSameResolution, Reason: fmt.Sprintf("it holds partition %d of this plan with the range [%d, %d), and this process was given [%d, %d): "+
				"the processes of the plan were started with different resolutions", r.Partition, cp.Start, cp.End, r.Start, r.End)}
		}
		from := r.Start
		if ours && cp.Offset > from {
			from = cp.Offset
		}
		states = append(states, newState(j.Resolution.Topic, r, from))
	}
	return states, nil
}

// mergeReports adds a generation's partition reports to those of the
// earlier generations; moved marks the unfinished ones as taken over.
func mergeReports(reports map[int32]*PartitionReport, res *Resolution, states []*worker.State, moved bool) {
	for _, s := range states {
		rg, _ := res.rangeOf(s.Partition)
		pr := partitionReport(rg, s)
		pr.Moved = !pr.Done && moved
		if prev, ok := reports[s.Partition]; ok {
			pr.From, pr.Read, pr.Written = prev.From, prev.Read+pr.Read, prev.Written+pr.Written
			pr.DurationMS += prev.DurationMS
		}
		reports[s.Partition] = &pr
	}
}

// awaitAllDone keeps a member whose partitions are done in the group until
// every partition of the plan is done (errAllDone), the generation ends
// (nil: rejoin) or ctx is cancelled.
func (j *joined) awaitAllDone(ctx, gctx, rctx context.Context) error {
	t := time.NewTicker(joinDonePoll)
	defer t.Stop()
	for {
		done, err := j.allDone(rctx)
		switch {
		case err == nil && done:
			return errAllDone
		case err != nil && rctx.Err() == nil:
			j.opts.Log.Warn().Err(err).Msg("read the group's checkpoints")
		}
		select {
		case <-gctx.Done():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w: this member's partitions are done; the others' are not", ErrInterrupted)
		case <-t.C:
		}
	}
}

// allDone reports whether the group's checkpoints put every partition of
// the plan at its end.
func (j *joined) allDone(ctx context.Context) (bool, error) {
	cps, err := j.c.Checkpoints(ctx, j.Plan.Group, j.Resolution.Topic, partitionsOf(j.Resolution.Ranges))
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(j.Resolution.Ranges, func(r Range) bool {
		cp := cps[r.Partition]
		return r.Start < r.End && (!cp.Replay || cp.Fingerprint != j.Resolution.Fingerprint || cp.Offset < r.End)
	}), nil
}

// pinJoined pins a fresh run's ranges before this process joins the group.
func (j *joined) pinJoined(work context.Context) error {
	if !j.Fresh {
		return nil
	}
	// The first process pins the ranges before it joins; once a member
	// joined, the group refuses standalone commits, and the ranges are
	// those of the same resolution file (Prepare checked the plan).
	// A refusal because classic members hold the group (the other
	// processes, checked by Prepare) is expected; UNSUPPORTED_VERSION
	// (a live KIP-848 consumer group) is not.
	var inUse *source.GroupInUseError
	if err := (settling{Job: j.Job, sink: j.sink}).commitStarts(work); err != nil && !(errors.As(err, &inUse) && inUse.Members) {
		return err
	}
	// A checkpoint table may hold an earlier run's checkpoints under the
	// same run identity; lowering them is always safe.
	if store := j.sink.Capabilities().Checkpoints; store != nil {
		if err := store.ResetCheckpoints(work, j.Plan.Group, j.Resolution.Topic); err != nil {
			return fmt.Errorf("reset the sink's checkpoints: %w", err)
		}
	}
	return nil
}

// memberOf takes part in cg's generations until the member fails, is
// interrupted, or every partition of the plan is done (errAllDone); the
// partitions' reports of every generation are merged into reports.
func (j *joined) memberOf(ctx context.Context, cg *source.Membership) error {
	log := j.opts.Log.With().Str("plan", j.Plan.Name).Str("group", j.Plan.Group).Logger()
	var runErr error
	failures := 0
	for runErr == nil {
		gen, err := cg.Next(ctx)
		var foreign *source.ForeignMemberError
		if err != nil {
			switch {
			case ctx.Err() != nil:
				runErr = fmt.Errorf("%w: left group %s; the other members take over, or re-run the same command to resume", ErrInterrupted, j.Plan.Group)
			case errors.As(err, &foreign):
				// kafka-go, leading the group, met a member it cannot
				// decode: not a joined replay process.
				runErr = &fault.SafetyError{Group: j.Plan.Group, Hint: fault.HintJoinedOnly, Reason: "a consumer that is not a joined process of this plan joined it (" +
					foreign.Error() + "): it reads the topic in the group and commits over the replay's checkpoints; stop it, and give the plan a group nobody else uses"}
			case source.Retriable(err) && failures < group.JoinMaxFailures:
				// kafka-go keeps trying (a rebalance in progress, a
				// coordinator moving) and reports each failed attempt here.
				failures++
				log.Warn().Err(err).Int("attempt", failures).Msg("joining the replay group failed; trying again")
				continue
			default:
				runErr = fmt.Errorf("join group %s: %w", j.Plan.Group, err)
			}
			break
		}
		failures = 0
		j.commits.Load().SetMember(&gen.Member)
		mine := gen.Partitions
		log.Info().Int32("generation", gen.Generation).Ints32("partitions", mine).Msg("joined the replay group")
		ended := make(chan error, 1)
		gen.Start(func(gctx context.Context) {
			ended <- j.runGeneration(ctx, gctx, mine)
		})
		switch err := <-ended; {
		case errors.Is(err, errAllDone):
			runErr = errAllDone
		case err != nil:
			runErr = err
		}
	}
	return runErr
}

// offsetsOf returns the offsets left to read in the ranges of the
// partitions of states (from each state's From), and in all the ranges:
// the others from their checkpoint of this plan in cps, when it is past
// the range's start.
func (r *Resolution) offsetsOf(states []*worker.State, cps map[int32]group.Checkpoint) (mine, all int64) {
	for _, rg := range r.Ranges {
		from := rg.Start
		if i := slices.IndexFunc(states, func(s *worker.State) bool { return s.Partition == rg.Partition }); i >= 0 {
			from = states[i].From
			mine += max(rg.End-from, 0)
		} else if cp := cps[rg.Partition]; cp.Replay && cp.Fingerprint == r.Fingerprint && cp.Offset > from {
			from = cp.Offset
		}
		all += max(rg.End-from, 0)
	}
	return mine, all
}

// throttleShare is the part of limit t that a joined member assigned
// assigned of total offsets takes; never 0 (unlimited).
func throttleShare(t plan.Throttle, assigned, total int64) plan.Throttle {
	if total <= 0 || assigned >= total {
		return t
	}
	f := float64(max(assigned, 0)) / float64(total)
	out := t
	if t.RecordsPerSecond > 0 {
		out.RecordsPerSecond = max(t.RecordsPerSecond*f, 1e-3)
	}
	if t.BytesPerSecond > 0 {
		out.BytesPerSecond = plan.ByteSize(max(int64(float64(t.BytesPerSecond)*f), 1))
	}
	return out
}

// LocalOutputError refuses a joined run (RunJoined) into a sink that keeps
// its output on this machine while the partitions are spread over several.
type LocalOutputError struct {
	// Sink is the sink's type; DeadLetters is true for the dead-letter sink.
	Sink        string
	DeadLetters bool
}

func (e *LocalOutputError) Error() string {
	if e.DeadLetters {
		return "the dead-letter sink keeps its output on this machine, and the partitions are spread over several: use a postgres, kafka or http dead-letter sink"
	}
	return fmt.Sprintf("the %s sink keeps its output on this machine, and the partitions are spread over several: use a postgres, kafka or http sink", e.Sink)
}
