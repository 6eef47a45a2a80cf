// Package group keeps a plan's dedicated replay consumer group safe: what
// replay commits to it (checkpoints with their metadata), who may be a
// member (the hold of a run, the processes of a joined run), which
// commits it refuses (another plan's, another incarnation's, a real
// consumer's), and the local record of a run that outlives the group's
// commits.
package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/source"
)

// Meta is the commit metadata replay writes with every offset it commits
// to the replay group: which plan made the commit and where that
// partition's range ends, so `replay status` and a resumed run find the
// fixed range again, and standard tools show the remaining lag. Kept far
// below Kafka's offset.metadata.max.bytes (4 KiB).
type Meta struct {
	Tool        string `json:"tool"` // always MetaTool
	Plan        string `json:"plan"`
	Fingerprint string `json:"fp"`
	Start       int64  `json:"start"`
	End         int64  `json:"end"`
	// Pos is the sink's durable position for the partition at this commit
	// (sinks.Positioner); omitted when unknown.
	Pos int64 `json:"pos,omitempty"`
	// DPos is the same for the dead-letter sink.
	DPos int64 `json:"dpos,omitempty"`
	// Iv is the start of the schedule interval the range belongs to (RFC
	// 3339, UTC); omitted for a plan without a schedule.
	Iv string `json:"iv,omitempty"`
	// Tid is the topic's ID (KIP-516, 22 characters) the range was
	// resolved on; omitted when the brokers report none.
	Tid string `json:"tid,omitempty"`
	// Pin marks a range a run of several topics pinned before it reached
	// the topic (it wrote nothing of it yet).
	Pin bool `json:"pin,omitempty"`
}

// MetaTool is Meta.Tool: it tells replay's commits from any other.
const MetaTool = "replay"

// Encode renders m as the JSON a commit carries.
func (m Meta) Encode() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// Checkpoint is what the replay group holds for one partition.
type Checkpoint struct {
	Partition int32
	// Offset is the next offset to read (everything below is durable in the
	// sink); -1 when the group has no commit for the partition.
	Offset int64
	// Replay is false for a commit that replay did not make.
	Replay      bool
	Plan        string
	Fingerprint string
	Start, End  int64
	// Position is the sink's durable position recorded with the commit
	// (sinks.Positioner); 0 when unknown. DeadLetterPosition is the
	// dead-letter sink's.
	Position, DeadLetterPosition int64
	// Interval is the start of the schedule interval the range belongs to;
	// zero for a plan without a schedule.
	Interval time.Time
	// TopicID is the ID of the topic the range was resolved on (KIP-516);
	// "" when unknown.
	TopicID string
	// Pinned: the run pinned the range before it reached the topic
	// (Meta.Pin).
	Pinned bool
}

// Done reports whether the partition's range is finished.
func (c Checkpoint) Done() bool { return c.Replay && c.Offset >= c.End }

// Checkpoints reads the group's committed offsets for the partitions
// (OffsetFetch). A group that never committed has Offset -1 everywhere.
func Checkpoints(ctx context.Context, c *source.Cluster, group, topic string, parts []int32) (map[int32]Checkpoint, error) {
	commits, err := c.Committed(ctx, group, topic, parts)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]Checkpoint, len(commits))
	for p, cm := range commits {
		out[p] = decode(cm)
	}
	return out, nil
}

// decode reads a commit with replay's metadata.
func decode(cm source.Committed) Checkpoint {
	cp := Checkpoint{Partition: cm.Partition, Offset: cm.Offset}
	var m Meta
	if json.Unmarshal([]byte(cm.Metadata), &m) == nil && m.Tool == MetaTool {
		cp.Replay, cp.Plan, cp.Fingerprint, cp.Start, cp.End, cp.Position, cp.DeadLetterPosition, cp.TopicID = true, m.Plan, m.Fingerprint, m.Start, m.End, m.Pos, m.DPos, m.Tid
		cp.Pinned = m.Pin
		if t, err := time.Parse(time.RFC3339, m.Iv); err == nil {
			cp.Interval = t.UTC()
		}
	}
	return cp
}

// Commit commits offsets with their metadata as m (a joined member), or standalone when m is nil. A
// standalone commit the broker refuses because the group is in use is a
// *fault.SafetyError; a member's commit refused after a rebalance wraps
// source.ErrFenced.
func Commit(ctx context.Context, c *source.Cluster, m *source.Member, group, topic string, offsets map[int32]int64, meta map[int32]Meta) error {
	commits := make(map[int32]source.Commit, len(offsets))
	for p, off := range offsets {
		commits[p] = source.Commit{Offset: off, Metadata: meta[p].Encode()}
	}
	err := c.Commit(ctx, m, group, topic, commits)
	if ge := (*source.GroupInUseError)(nil); errors.As(err, &ge) {
		return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("the broker rejected replay's commit (%v): the group has active members; use a dedicated group", ge.Err), Err: err}
	}
	return err
}

// DeleteCommits removes the group's commits for parts. The broker refuses
// it while the group is in use: that is a *fault.SafetyError. A group
// that no longer exists has nothing to delete.
func DeleteCommits(ctx context.Context, c *source.Cluster, group, topic string, parts []int32) error {
	err := c.DeleteOffsets(ctx, group, topic, parts)
	ge := (*source.GroupInUseError)(nil)
	switch {
	case !errors.As(err, &ge):
		return err
	case ge.Partition < 0:
		return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("the broker refused to delete its commits (%v): the group is in use; use a dedicated group", ge.Err)}
	}
	return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("the broker refused to delete its commit on %s/%d (%v): a member of the group consumes the topic", topic, ge.Partition, ge.Err)}
}

// CheckReplayOnly refuses a group holding any commit, on any topic,
// without replay's metadata (OffsetFetch for all topics); advice ends the
// reason. run and reset refuse such a group alike.
func CheckReplayOnly(ctx context.Context, c *source.Cluster, group, advice string) error {
	cm, err := Foreign(ctx, c, group)
	if err != nil || cm == nil {
		return err
	}
	return &fault.SafetyError{Group: group, Reason: fmt.Sprintf("it has a commit on %s that replay did not make: it is, or was, a real consumer group, and %s", cm, advice)}
}

// ForeignCommit is a commit in a replay group that replay did not make.
type ForeignCommit struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (f ForeignCommit) String() string {
	return fmt.Sprintf("%s/%d (offset %d)", f.Topic, f.Partition, f.Offset)
}

// Foreign returns the first (by topic, then partition) commit of the
// group, on any topic, without replay's metadata; nil when there is none.
func Foreign(ctx context.Context, c *source.Cluster, group string) (*ForeignCommit, error) {
	all, err := c.CommittedAll(ctx, group)
	if err != nil {
		return nil, err
	}
	for _, t := range slices.Sorted(maps.Keys(all)) {
		for _, cm := range slices.SortedFunc(slices.Values(all[t]), func(a, b source.Committed) int { return int(a.Partition) - int(b.Partition) }) {
			if cm.Offset >= 0 && !decode(cm).Replay {
				return &ForeignCommit{Topic: t, Partition: cm.Partition, Offset: cm.Offset}, nil
			}
		}
	}
	return nil, nil
}
