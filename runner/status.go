package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
)

// State is where a plan stands in its replay group.
type State string

// States of a plan in its replay group.
const (
	// StateNotStarted: the group has no commit for the plan's topic.
	StateNotStarted State = "not-started"
	// StateInProgress: this plan's checkpoints are there and some partition
	// has not reached its end; `replay run` resumes.
	StateInProgress State = "in-progress"
	// StateDone: every partition this plan committed reached its end.
	StateDone State = "done"
	// StateOtherPlan: the group holds checkpoints of another plan (or of an
	// earlier version of this one): `replay run` refuses without --restart.
	StateOtherPlan State = "other-plan"
	// StateForeign: the group holds commits that replay did not make: it is,
	// or was, a real consumer group; replay refuses to run in it or reset it.
	StateForeign State = "foreign"
)

// PartitionProgress is one partition of a plan's topic as its replay group
// sees it. Offsets unknown (no commit) are -1.
type PartitionProgress struct {
	// Topic names the partition's topic in the progress of a plan of
	// several topics (JoinProgress); "" in a plan of one.
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Committed is the next offset to read (everything below is durable in
	// the sink); -1 without a commit.
	Committed int64 `json:"committed"`
	// Replay is true when the commit carries replay's metadata.
	Replay bool `json:"replay"`
	// ThisPlan is true when the commit was made by this plan (same fingerprint).
	ThisPlan    bool   `json:"this_plan"`
	Plan        string `json:"plan,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// Start and End are the fixed range [Start, End) recorded with the commit.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Remaining is End - Committed (0 when done), -1 when unknown.
	Remaining   int64   `json:"remaining"`
	PercentDone float64 `json:"percent_done"`
	Done        bool    `json:"done"`
	// LogStart and HighWatermark are the partition's offsets now.
	LogStart      int64 `json:"log_start_offset"`
	HighWatermark int64 `json:"high_watermark"`
	// Lost counts offsets between the checkpoint and the log start that
	// retention deleted before they were replayed: a resume fails on them
	// unless the plan sets allow_data_loss.
	Lost int64 `json:"lost_offsets,omitempty"`
}

// Progress is where a plan stands, read from its replay group's commits
// (OffsetFetch) and the topic's offsets; reading it changes nothing.
type Progress struct {
	Plan        string `json:"plan"`
	Fingerprint string `json:"fingerprint"`
	Topic       string `json:"topic,omitempty"`
	// Topics lists the topics of a plan of several (JoinProgress); Topic
	// is "" then (and left out).
	Topics []string `json:"topics,omitempty"`
	Group  string   `json:"group"`
	// GroupState is the coordinator's state of the group (Empty, Dead,
	// Stable, ...), or "unknown: <error>".
	GroupState string `json:"group_state"`
	// Holder is the plain run that holds the group now (host, pid, since);
	// "" when none does.
	Holder string `json:"holder,omitempty"`
	// HolderGone is true when Holder ran on this machine in a process
	// that no longer exists (killed).
	HolderGone bool `json:"holder_gone,omitempty"`
	// Members is the number of the group's members: a plain run's hold,
	// or the --join processes sharing the plan.
	Members int   `json:"members"`
	State   State `json:"state"`
	// OtherPlan and OtherFingerprint name the plan whose checkpoints the
	// group holds when State is StateOtherPlan.
	OtherPlan        string `json:"other_plan,omitempty"`
	OtherFingerprint string `json:"other_fingerprint,omitempty"`
	// Foreign is the first commit replay did not make, on any topic of the
	// group, when State is StateForeign.
	Foreign *group.ForeignCommit `json:"foreign_commit,omitempty"`
	// Record is this machine's record of the plan's run when the group has
	// no commit of it; the caller sets it.
	Record *group.RunRecord `json:"run_record,omitempty"`
	// Partitions are the partitions the plan selects or the group committed,
	// sorted.
	Partitions []PartitionProgress `json:"partitions"`
	// Records, Replayed and Remaining sum the ranges of the partitions with a
	// replay commit; PercentDone is Replayed over Records.
	Records     int64   `json:"records"`
	Replayed    int64   `json:"replayed"`
	Remaining   int64   `json:"remaining"`
	PercentDone float64 `json:"percent_done"`
	// ETA is the time Remaining takes at the plan's throttle (all the
	// processes of the plan together), "unthrottled" without one.
	ETA       string    `json:"eta"`
	CheckedAt time.Time `json:"checked_at"`
}

// Progress reads where p stands in its replay group. It never commits and
// works whatever the group's state.
func (c *Cluster) Progress(ctx context.Context, p *plan.Plan) (*Progress, error) {
	topic := p.Source.Topic
	all, cps, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, err
	}
	selected, _, err := selectPartitions(p, all)
	if err != nil {
		return nil, err
	}
	var parts []int32
	for _, part := range all {
		if cps[part].Offset >= 0 || slices.Contains(selected, part) {
			parts = append(parts, part)
		}
	}
	offs, err := c.ListOffsets(ctx, topic, parts, p.Source.Isolation)
	if err != nil {
		return nil, err
	}
	pr := &Progress{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: topic, Group: p.Group, CheckedAt: time.Now().UTC()}
	if st, err := group.State(ctx, c.Cluster, p.Group); err != nil {
		pr.GroupState = "unknown: " + err.Error()
	} else {
		pr.GroupState, pr.Holder, pr.HolderGone, pr.Members = st.State, st.Holder, st.HolderGone, st.Members
	}
	for _, part := range parts {
		pr.Partitions = append(pr.Partitions, partitionProgress(cps[part], offs[part], pr.Fingerprint))
	}
	pr.summarize()
	pr.ETA = "unthrottled"
	if d, ok := ETA(p.Throttle, pr.Remaining, 0); ok {
		pr.ETA = d.String()
	}
	// A commit replay did not make on another topic makes it foreign too.
	if pr.Foreign, err = group.Foreign(ctx, c.Cluster, p.Group); err != nil {
		return nil, err
	}
	if pr.Foreign != nil {
		pr.State, pr.OtherPlan, pr.OtherFingerprint = StateForeign, "", ""
	}
	return pr, nil
}

func partitionProgress(cp group.Checkpoint, o source.Offsets, fp string) PartitionProgress {
	pp := PartitionProgress{Partition: cp.Partition, Committed: cp.Offset, Start: -1, End: -1, Remaining: -1,
		LogStart: o.LogStart, HighWatermark: o.HighWatermark}
	if cp.Offset < 0 || !cp.Replay {
		return pp
	}
	pp.Replay, pp.Plan, pp.Fingerprint, pp.ThisPlan = true, cp.Plan, cp.Fingerprint, cp.Fingerprint == fp
	pp.Start, pp.End, pp.Done = cp.Start, cp.End, cp.Done()
	pp.Remaining = max(cp.End-cp.Offset, 0)
	pp.PercentDone = percent(min(max(cp.Offset, cp.Start), cp.End)-cp.Start, cp.End-cp.Start)
	if !pp.Done && cp.Offset < o.LogStart {
		pp.Lost = min(o.LogStart, cp.End) - cp.Offset
	}
	return pp
}

// percent is done/total in percent; an empty total is 100% done.
func percent(done, total int64) float64 {
	if total <= 0 {
		return 100
	}
	return float64(done) * 100 / float64(total)
}

// summarize sets the totals and the overall state: a commit replay did not
// make decides first, then the first (by partition) of another plan.
func (pr *Progress) summarize() {
	committed, foreign, other, allDone := false, false, false, true
	for _, pp := range pr.Partitions {
		if pp.Committed < 0 {
			continue
		}
		committed = true
		if !pp.Replay {
			foreign = true
			continue
		}
		if !pp.ThisPlan && !other {
			other, pr.OtherPlan, pr.OtherFingerprint = true, pp.Plan, pp.Fingerprint
		}
		pr.Records += pp.End - pp.Start
		pr.Remaining += pp.Remaining
		allDone = allDone && pp.Done
	}
	pr.Replayed = pr.Records - pr.Remaining
	pr.PercentDone = percent(pr.Replayed, pr.Records)
	switch {
	case foreign:
		pr.State, pr.OtherPlan, pr.OtherFingerprint = StateForeign, "", ""
	case other:
		pr.State = StateOtherPlan
	case !committed:
		pr.State, pr.PercentDone = StateNotStarted, 0
	case allDone:
		pr.State = StateDone
	default:
		pr.State = StateInProgress
	}
}

// CheckReset returns the commits Reset would delete: p's group's
// checkpoints on p's topic, sorted by partition (none when the group never
// committed). It refuses (*fault.SafetyError) what Reset refuses: a group that
// has active members or is not Empty/Dead, and a group that holds, on any
// topic, a commit replay did not make. It changes nothing but the
// group's members: a run of the plan on this machine whose process is gone
// (killed) is removed first (group.LetGoOfDead), so a reset right after
// the kill is not refused naming it.
func (c *Cluster) CheckReset(ctx context.Context, p *plan.Plan) ([]group.Checkpoint, error) {
	if err := group.LetGoOfDead(ctx, c.Cluster, p); err != nil {
		return nil, err
	}
	if err := group.CheckIdle(ctx, c.Cluster, p.Group); err != nil {
		return nil, err
	}
	if err := group.CheckReplayOnly(ctx, c.Cluster, p.Group, "replay never deletes its offsets"); err != nil {
		return nil, err
	}
	all, cps, err := c.gather(ctx, p, p.Group)
	if err != nil {
		return nil, err
	}
	var out []group.Checkpoint
	for _, part := range all {
		if cps[part].Offset >= 0 {
			out = append(out, cps[part])
		}
	}
	return out, nil
}

// Reset deletes p's replay group's committed offsets on p's topic
// (OffsetDelete, KIP-496), so that the next run of p resolves its window
// afresh and starts over. It refuses (*fault.SafetyError) as CheckReset does, and
// when the broker answers that the group is in use (NON_EMPTY_GROUP,
// GROUP_SUBSCRIBED_TO_TOPIC). It returns the commits it deleted.
func (c *Cluster) Reset(ctx context.Context, p *plan.Plan) ([]group.Checkpoint, error) {
	cps, err := c.CheckReset(ctx, p)
	if err != nil || len(cps) == 0 {
		return nil, err
	}
	parts := make([]int32, len(cps))
	for i, cp := range cps {
		parts[i] = cp.Partition
	}
	if err := group.DeleteCommits(ctx, c.Cluster, p.Group, p.Source.Topic, parts); err != nil {
		return nil, err
	}
	// Read back: a reset that left a commit would make the next run
	// resume instead of starting over.
	left, err := c.Checkpoints(ctx, p.Group, p.Source.Topic, parts)
	if err != nil {
		return cps, fmt.Errorf("check the reset: %w", err)
	}
	for _, part := range parts {
		if left[part].Offset >= 0 {
			return cps, fmt.Errorf("reset group %s: the commit on %s/%d (offset %d) is still there after the broker acknowledged its deletion", p.Group, p.Source.Topic, part, left[part].Offset)
		}
	}
	return cps, nil
}
