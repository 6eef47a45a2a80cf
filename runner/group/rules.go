package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
)

// JoinClientID is the client ID of every process of the plan with
// fingerprint fp that joins its replay group (run --join): how a joining
// process tells its peers from a live consumer that must not share the
// group.
func JoinClientID(fp string) string { return "replay-join-" + fp }

// Timeouts of a member of the replay group (a joined process, a hold). A
// member that dies is replaced after JoinSessionTimeout (kfake and Kafka
// refuse less than 6 s); a rebalance waits up to JoinRebalanceTimeout for
// every member to finish its in-flight batch and commit.
const (
	JoinSessionTimeout   = 10 * time.Second
	JoinRebalanceTimeout = 30 * time.Second
)

// JoinMaxFailures bounds consecutive failed attempts to join (kafka-go
// backs off 5 s between most of them; a rebalance in progress is paced by
// the broker).
const JoinMaxFailures = 30

// CheckRunnable refuses, as reset does, a group that holds a commit
// replay did not make on any topic, not only on the plan's: it is, or
// was, a real consumer group.
func CheckRunnable(ctx context.Context, c *source.Cluster, p *plan.Plan) error {
	return CheckReplayOnly(ctx, c, p.Group, "replay never runs in it: name a dedicated group such as "+DedicatedGroup(p))
}

// Classify checks the group's commits cps on p's topic: true when they are
// this plan's (and restart does not discard them). A commit replay did
// not make is a refusal (*fault.SafetyError), and so are another plan's
// checkpoints unless restart.
func Classify(p *plan.Plan, cps map[int32]Checkpoint, restart bool) (bool, error) {
	fp := p.Fingerprint()
	mine := false
	for _, part := range slices.Sorted(maps.Keys(cps)) {
		cp := cps[part]
		switch {
		case cp.Offset < 0:
		case !cp.Replay:
			return false, &fault.SafetyError{Group: p.Group, Reason: fmt.Sprintf("it has a commit on %s/%d (offset %d) that replay did not make: it is, or was, a real consumer group; name a dedicated group such as %s", p.Source.Topic, part, cp.Offset, DedicatedGroup(p))}
		case cp.Fingerprint != fp && !restart:
			return false, &fault.SafetyError{Group: p.Group, Hint: fault.HintRestart, Reason: fmt.Sprintf("it holds checkpoints of another plan (%q, fingerprint %s; this plan is %s): the plan changed since that run; discard them and start over, or use another group", cp.Plan, cp.Fingerprint, fp)}
		case cp.Fingerprint == fp:
			mine = true
		}
	}
	return mine && !restart, nil
}

// AnyCommit reports whether the group holds a commit on any partition of
// the topic.
func AnyCommit(cps map[int32]Checkpoint) bool {
	return slices.ContainsFunc(slices.Collect(maps.Values(cps)), func(cp Checkpoint) bool { return cp.Offset >= 0 })
}

// ReplayCommitted lists the partitions of all on which the group holds a
// commit replay made (cps).
func ReplayCommitted(all []int32, cps map[int32]Checkpoint) []int32 {
	var parts []int32
	for _, part := range all {
		if cp := cps[part]; cp.Replay && cp.Offset >= 0 {
			parts = append(parts, part)
		}
	}
	return parts
}

// DedicatedGroup suggests a group name for plan p other than its group.
func DedicatedGroup(p *plan.Plan) string {
	if g := "replay." + p.Name; g != p.Group {
		return g
	}
	return "replay." + p.Name + "-2"
}

// IncarnationError refuses ranges resolved on another incarnation of the
// topic: it was deleted and created again under the same name (KIP-516
// topic IDs differ). Its offsets name other records, so resuming would
// read another log, and a sink keyed by topic, partition and offset would
// have the new records overwrite the old ones. It comes wrapped in a
// *fault.SafetyError (refused: the command line exits 3).
type IncarnationError struct {
	Topic, Group string
	// Recorded is the topic ID the checkpoints or the resolution file
	// record (Where says which), Now the topic's ID now.
	Recorded, Now, Where string
	// Pinned is true when a resolution file records the old ID.
	Pinned bool
}

func (e *IncarnationError) Error() string {
	return fmt.Sprintf("topic %s was deleted and created again since %s: that was on topic ID %s, and the topic now has ID %s; its offsets now name other records, so replaying them would read another log and, in a sink keyed by topic, partition and offset, write the new records over the old ones. %s",
		e.Topic, e.Where, e.Recorded, e.Now, e.advice())
}

func (e *IncarnationError) advice() string {
	if e.Pinned {
		return "Replay the new topic with a new resolution file, into another sink or after clearing the rows of the old one"
	}
	return "Replay the new topic under another group (or into another sink), or re-run with --restart to replay it from scratch in this one"
}

// Refuse wraps e in the *fault.SafetyError the command line reports (exit 3).
func (e *IncarnationError) Refuse() error {
	se := &fault.SafetyError{Group: e.Group, Reason: e.Error(), Err: e}
	if e.Pinned {
		se.Hint = fault.HintResolveAgain
	}
	return se
}

// CheckIncarnation refuses (*IncarnationError) checkpoints of the group
// made on another incarnation of the topic (their metadata records its ID).
// Kafka drops a deleted topic's commits from every group, so these are
// commits a run made after the topic was created again, with the ranges of
// the old one.
func CheckIncarnation(p *plan.Plan, cps map[int32]Checkpoint, topicID string) error {
	if topicID == "" {
		return nil
	}
	for _, part := range slices.Sorted(maps.Keys(cps)) {
		if cp := cps[part]; cp.Replay && cp.Offset >= 0 && cp.TopicID != "" && cp.TopicID != topicID {
			return (&IncarnationError{Topic: p.Source.Topic, Group: p.Group, Recorded: cp.TopicID, Now: topicID,
				Where: fmt.Sprintf("the group's checkpoints were made (partition %d at offset %d)", part, cp.Offset)}).Refuse()
		}
	}
	return nil
}
