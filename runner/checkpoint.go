package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
)

// SafetyError is a refusal to touch a consumer group or to run a plan
// because doing so could corrupt someone else's progress or mix two plans.
// The command line exits with code 3 on it.
type SafetyError struct {
	Group  string
	Reason string
	// Err is the broker's error behind the refusal, if any.
	Err error
}

func (e *SafetyError) Error() string { return fmt.Sprintf("refusing group %q: %s", e.Group, e.Reason) }

func (e *SafetyError) Unwrap() error { return e.Err }

// checkpointMeta is the commit metadata replay writes with every offset it
// commits to the replay group: which plan made the commit and where that
// partition's range ends, so `replay status` and a resumed run find the
// fixed range again, and standard tools show the remaining lag. Kept far
// below Kafka's offset.metadata.max.bytes (4 KiB).
type checkpointMeta struct {
	Tool        string `json:"tool"` // always "replay"
	Plan        string `json:"plan"`
	Fingerprint string `json:"fp"`
	Start       int64  `json:"start"`
	End         int64  `json:"end"`
	// Pos is the sink's durable position for the partition at this commit
	// (sinks.Positioner); omitted when unknown.
	Pos int64 `json:"pos,omitempty"`
	// DPos is the same for the dead-letter sink.
	DPos int64 `json:"dpos,omitempty"`
}

const metaTool = "replay"

func (m checkpointMeta) encode() string {
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
}

// Done reports whether the partition's range is finished.
func (c Checkpoint) Done() bool { return c.Replay && c.Offset >= c.End }

// Checkpoints reads the group's committed offsets for the partitions
// (OffsetFetch). A group that never committed has Offset -1 everywhere.
func (c *Cluster) Checkpoints(ctx context.Context, group, topic string, parts []int32) (map[int32]Checkpoint, error) {
	ints := make([]int, len(parts))
	for i, p := range parts {
		ints[i] = int(p)
	}
	resp, err := c.Client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ints}})
	if err != nil {
		return nil, fmt.Errorf("read commits of group %s: %w", group, err)
	}
	out := make(map[int32]Checkpoint, len(parts))
	for _, p := range parts {
		out[p] = Checkpoint{Partition: p, Offset: -1}
	}
	if resp.Error != nil {
		if errors.Is(resp.Error, kafka.GroupIdNotFound) {
			return out, nil
		}
		return nil, fmt.Errorf("read commits of group %s: %w", group, resp.Error)
	}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			if errors.Is(po.Error, kafka.UnknownTopicOrPartition) {
				continue
			}
			return nil, fmt.Errorf("read commit of group %s for %s/%d: %w", group, topic, po.Partition, po.Error)
		}
		cp := Checkpoint{Partition: int32(po.Partition), Offset: po.CommittedOffset}
		var m checkpointMeta
		if json.Unmarshal([]byte(po.Metadata), &m) == nil && m.Tool == metaTool {
			cp.Replay, cp.Plan, cp.Fingerprint, cp.Start, cp.End, cp.Position, cp.DeadLetterPosition = true, m.Plan, m.Fingerprint, m.Start, m.End, m.Pos, m.DPos
		}
		if _, asked := out[cp.Partition]; asked {
			out[cp.Partition] = cp
		}
	}
	return out, nil
}

// checkGroupIdle refuses a group that has members or is rebalancing
// (DescribeGroups). Member lists are not trusted (kafka-go cannot decode
// members of modern clients, #1212): only the state is, and an error
// describing the group is a refusal too.
func (c *Cluster) checkGroupIdle(ctx context.Context, group string) error {
	return c.checkGroupMembers(ctx, group, "")
}

// checkGroupMembers refuses a group that has members or is rebalancing,
// unless joinID is set and every member is a 'replay run --join' process
// with that client ID (joinClientID). A group whose state or members
// cannot be told is refused too: kafka-go cannot decode members of modern
// clients (#1212), and a live KIP-848 consumer group shows as Stable with
// no members at all (KAFKA-GO.md §5), while a group of --join processes
// always lists its kafka-go members.
func (c *Cluster) checkGroupMembers(ctx context.Context, group, joinID string) error {
	resp, err := c.Client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	for _, g := range resp.Groups {
		if g.GroupID != group {
			continue
		}
		if g.Error != nil {
			return &SafetyError{Group: group, Reason: fmt.Sprintf("cannot tell whether it has live members (%v): use a dedicated, unused group name such as replay.<plan-name>", g.Error)}
		}
		if g.GroupState == "Empty" || g.GroupState == "Dead" || g.GroupState == "" {
			continue
		}
		if joinID == "" || len(g.Members) == 0 {
			return &SafetyError{Group: group, Reason: fmt.Sprintf("it is %s with active members: it looks like a live consumer group; a replay must use a dedicated group nobody else consumes with (e.g. replay.<plan-name>)", g.GroupState)}
		}
		for _, m := range g.Members {
			if m.ClientID != joinID {
				return &SafetyError{Group: group, Reason: fmt.Sprintf("it is %s with a member that is not a 'replay run --join' of this plan (client id %q, host %s): it looks like a live consumer group, or a process of another plan; use a dedicated group", g.GroupState, m.ClientID, m.ClientHost)}
			}
		}
	}
	return nil
}

// commit stores offsets for the replay group with a standalone
// OffsetCommit (generation -1, no member id: the group must have no live
// members, and the broker rejects the commit with UNKNOWN_MEMBER_ID or
// ILLEGAL_GENERATION when it has some, which is the fence against a live
// group).
func (c *Cluster) commit(ctx context.Context, group, topic string, offsets map[int32]int64, meta map[int32]checkpointMeta) error {
	return c.commitAs(ctx, nil, group, topic, offsets, meta)
}

// member is this process's identity in a replay group it joined (run
// --join): its commits carry it, and the broker accepts them only from the
// member of a current (or just ended) generation.
type member struct {
	generation int32
	id         string
}

// errFenced is a member's commit refused because the group moved on (a
// rebalance gave the partition to another member): nothing is lost, the
// new owner resumes from the last accepted commit.
var errFenced = errors.New("the group rebalanced: another member owns the partition now")

// commitAs commits as m (a joined member), or standalone when m is nil.
func (c *Cluster) commitAs(ctx context.Context, m *member, group, topic string, offsets map[int32]int64, meta map[int32]checkpointMeta) error {
	commits := make([]kafka.OffsetCommit, 0, len(offsets))
	for p, off := range offsets {
		commits = append(commits, kafka.OffsetCommit{Partition: int(p), Offset: off, Metadata: meta[p].encode()})
	}
	req := &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1, MemberID: "", Topics: map[string][]kafka.OffsetCommit{topic: commits}}
	if m != nil {
		req.GenerationID, req.MemberID = int(m.generation), m.id
	}
	resp, err := c.Client.OffsetCommit(ctx, req)
	if err != nil {
		return fmt.Errorf("commit to group %s: %w", group, err)
	}
	var errs []string
	for _, pr := range resp.Topics[topic] {
		if pr.Error == nil {
			continue
		}
		if m != nil && (errors.Is(pr.Error, kafka.UnknownMemberId) || errors.Is(pr.Error, kafka.IllegalGeneration) || errors.Is(pr.Error, kafka.RebalanceInProgress) ||
			errors.Is(pr.Error, kafka.NotCoordinatorForGroup) || errors.Is(pr.Error, kafka.GroupCoordinatorNotAvailable) || errors.Is(pr.Error, kafka.GroupLoadInProgress)) {
			// The group moved on, or its coordinator is moving: the member
			// rejoins and the partition's owner then delivers the batch again.
			return fmt.Errorf("commit %s/%d to group %s: %w (%v)", topic, pr.Partition, group, errFenced, pr.Error)
		}
		// UNSUPPORTED_VERSION: a standalone commit (OffsetCommit < v9) into
		// a live KIP-848 consumer-protocol group (KAFKA-GO.md §3).
		if errors.Is(pr.Error, kafka.UnknownMemberId) || errors.Is(pr.Error, kafka.IllegalGeneration) || errors.Is(pr.Error, kafka.RebalanceInProgress) || errors.Is(pr.Error, kafka.UnsupportedVersion) {
			return &SafetyError{Group: group, Reason: fmt.Sprintf("the broker rejected replay's commit (%v): the group has active members; use a dedicated group", pr.Error), Err: pr.Error}
		}
		errs = append(errs, fmt.Sprintf("%s/%d: %v", topic, pr.Partition, pr.Error))
	}
	if len(errs) > 0 {
		return fmt.Errorf("commit to group %s: %s", group, strings.Join(errs, "; "))
	}
	return nil
}

// deleteCommits removes the group's commits for parts (OffsetDelete,
// KIP-496). The broker refuses it while the group is in use
// (NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC): that is a *SafetyError. A
// group that no longer exists has nothing to delete.
func (c *Cluster) deleteCommits(ctx context.Context, group, topic string, parts []int32) error {
	if len(parts) == 0 {
		return nil
	}
	ints := make([]int, len(parts))
	for i, p := range parts {
		ints[i] = int(p)
	}
	resp, err := c.Client.OffsetDelete(ctx, &kafka.OffsetDeleteRequest{GroupID: group, Topics: map[string][]int{topic: ints}})
	if err != nil {
		return fmt.Errorf("delete commits of group %s on %s: %w", group, topic, err)
	}
	inUse := func(err error) bool {
		return errors.Is(err, kafka.NonEmptyGroup) || errors.Is(err, kafka.GroupSubscribedToTopic)
	}
	if resp.Error != nil {
		switch {
		case errors.Is(resp.Error, kafka.GroupIdNotFound):
			return nil
		case inUse(resp.Error):
			return &SafetyError{Group: group, Reason: fmt.Sprintf("the broker refused to delete its commits (%v): the group is in use; use a dedicated group", resp.Error)}
		}
		return fmt.Errorf("delete commits of group %s on %s: %w", group, topic, resp.Error)
	}
	var errs []string
	for _, pr := range resp.Topics[topic] {
		switch {
		case pr.Error == nil:
		case inUse(pr.Error):
			return &SafetyError{Group: group, Reason: fmt.Sprintf("the broker refused to delete its commit on %s/%d (%v): a member of the group consumes the topic", topic, pr.Partition, pr.Error)}
		default:
			errs = append(errs, fmt.Sprintf("%s/%d: %v", topic, pr.Partition, pr.Error))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete commits of group %s: %s", group, strings.Join(errs, "; "))
	}
	return nil
}
