package runner

import (
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
)

// preparing is a Job while Prepare or PrepareScheduled fixes its ranges:
// its methods read the group's checkpoints, the run record, a resolution
// file and the topic's offsets into the Job's resolution and resume
// points, and are of no use once the job runs.
type preparing struct{ *Job }

// startKind is how a run begins, as decideStart decides it.
type startKind int

const (
	// startFresh resolves the window afresh.
	startFresh startKind = iota
	// startResume continues this plan's checkpoints in the group, with the
	// ranges the first run fixed.
	startResume
	// startPinned takes the ranges of a resolution file (Options.Pinned);
	// the pin itself tells a resumed pin from a fresh one.
	startPinned
	// startFromRecord takes the ranges of the local run record, whose
	// commits the group lost (with Restart or ResumeFromSink).
	startFromRecord
)

// startFacts is what a run's start is decided from, gathered beforehand
// (Cluster.gather and the local run record): decideStart reads no network.
type startFacts struct {
	plan *plan.Plan
	// cps are the group's checkpoints on the plan's topic, by partition.
	cps map[int32]group.Checkpoint
	// topicID is the topic's ID now ("" when the cluster has none).
	topicID string
	// record is the local run record of the plan; nil when there is none
	// or the job keeps none.
	record *group.RunRecord
	// The options that choose.
	restart, join, resumeFromSink, pinned bool
}

// decideStart decides how a run of f.plan begins, or refuses it:
// checkpoints made on another incarnation of the topic (*fault.SafetyError
// holding an *group.IncarnationError, unless restart), commits that replay did
// not make or another plan's checkpoints (classify), a joined run with
// nothing fixed yet, and a group that lost the commits of a recorded run
// (the *fault.SafetyError of an *group.ExpiredError, unless restart or
// resumeFromSink).
func decideStart(f startFacts) (startKind, error) {
	p := f.plan
	if !f.restart {
		if err := group.CheckIncarnation(p, f.cps, f.topicID); err != nil {
			return 0, err
		}
	}
	if f.pinned {
		return startPinned, nil
	}
	resumable, err := group.Classify(p, f.cps, f.restart)
	switch {
	case err != nil:
		return 0, err
	case resumable:
		return startResume, nil
	case f.join:
		return 0, &fault.SafetyError{Group: p.Group, Hint: fault.HintResolveOnce, Reason: "a joined run needs the same fixed ranges in every process, and the group holds no run of this plan yet"}
	case f.record.Progress() && !group.AnyCommit(f.cps):
		if !f.restart && !f.resumeFromSink {
			return 0, group.RecordRefusal(p, f.record, f.record.Ranges)
		}
		return startFromRecord, nil
	}
	return startFresh, nil
}

// noCommits is what a fresh start does when the group holds no commit on
// the plan's topic, decided from the run record and the options alone.
type noCommits struct {
	// fromSink: continue from the sink's checkpoints (ResumeFromSink, or
	// a record with progress under ResumeFromSink); fresh says whether the
	// job is still fresh then (no record to take ranges from).
	fromSink, fresh bool
	// checkSink: Run checks the sink's checkpoint table before it writes
	// anything (no record at all).
	checkSink bool
}

// decideNoCommits decides noCommits: Restart starts over; a run record
// with progress is refused (its *group.ExpiredError as a *fault.SafetyError) unless
// resumeFromSink; without a record, the sink's checkpoints are checked.
func decideNoCommits(p *plan.Plan, rec *group.RunRecord, restart, resumeFromSink bool) (noCommits, error) {
	switch {
	case restart:
	case rec.Progress() && !resumeFromSink:
		return noCommits{}, group.RecordRefusal(p, rec, rec.Ranges)
	case rec.Progress(), resumeFromSink:
		return noCommits{fromSink: true, fresh: !rec.Progress()}, nil
	case rec == nil:
		return noCommits{checkSink: true}, nil
	}
	return noCommits{}, nil
}
