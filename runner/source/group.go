package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committed is a group's commit for one partition.
type Committed struct {
	Partition int32
	// Offset is the committed offset; -1 when the group has no commit for
	// the partition.
	Offset int64
	// Metadata is the string stored with the commit.
	Metadata string
}

// Commit is an offset to store for one partition, with its metadata.
type Commit struct {
	Offset   int64
	Metadata string
}

// Member is this process's identity in a group it joined: its commits
// carry it, and the broker accepts them only from the member of a current
// (or just ended) generation.
type Member struct {
	Generation int32
	ID         string
}

// ErrFenced is a member's commit refused because the member lost its
// place in the group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID: a rebalance gave the
// partition to another member, or the session expired): nothing is lost,
// the new owner resumes from the last accepted commit. A coordinator
// moving or loading is retried (call), never a fence.
var ErrFenced = errors.New("the group rebalanced: another member owns the partition now")

// GroupInUseError is a standalone commit or an offset deletion that the
// broker refused because the group is in use.
type GroupInUseError struct {
	Group string
	// Op is "commit" or "delete".
	Op    string
	Topic string
	// Partition is the partition refused, -1 for the whole request.
	Partition int32
	// Members is true when the answer shows classic group members
	// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS for a
	// commit; NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC for a deletion),
	// false for UNSUPPORTED_VERSION: a standalone commit into a live
	// consumer-protocol group (KIP-848).
	Members bool
	// Err is the broker's error.
	Err error
}

func (e *GroupInUseError) Error() string {
	if e.Partition < 0 {
		return fmt.Sprintf("%s offsets of group %s: the group is in use: %v", e.Op, e.Group, e.Err)
	}
	return fmt.Sprintf("%s offsets of group %s on %s/%d: the group is in use: %v", e.Op, e.Group, e.Topic, e.Partition, e.Err)
}

func (e *GroupInUseError) Unwrap() error { return e.Err }

// Committed reads the group's committed offsets for the partitions
// (OffsetFetch). A group that never committed has Offset -1 everywhere; so
// has a partition the broker does not know.
func (c *Cluster) Committed(ctx context.Context, group, topic string, parts []int32) (map[int32]Committed, error) {
	resp, err := c.offsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ints(parts)}})
	if err != nil {
		return nil, err
	}
	out := make(map[int32]Committed, len(parts))
	for _, p := range parts {
		out[p] = Committed{Partition: p, Offset: -1}
	}
	if resp == nil {
		return out, nil
	}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			if errors.Is(po.Error, kafka.UnknownTopicOrPartition) {
				continue
			}
			return nil, fmt.Errorf("read commit of group %s for %s/%d: %w", group, topic, po.Partition, po.Error)
		}
		if _, asked := out[int32(po.Partition)]; asked {
			out[int32(po.Partition)] = Committed{Partition: int32(po.Partition), Offset: po.CommittedOffset, Metadata: po.Metadata}
		}
	}
	return out, nil
}

// CommittedAll reads the group's commits on every topic (OffsetFetch),
// by topic; partitions without a commit or with an error are left out.
func (c *Cluster) CommittedAll(ctx context.Context, group string) (map[string][]Committed, error) {
	resp, err := c.offsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group})
	if err != nil || resp == nil {
		return nil, err
	}
	out := map[string][]Committed{}
	for t, pos := range resp.Topics {
		for _, po := range pos {
			if po.Error != nil || po.CommittedOffset < 0 {
				continue
			}
			out[t] = append(out[t], Committed{Partition: int32(po.Partition), Offset: po.CommittedOffset, Metadata: po.Metadata})
		}
	}
	return out, nil
}

// ints is parts as kafka-go's requests take them.
func ints(parts []int32) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = int(p)
	}
	return out
}

// offsetFetch sends req; a group that does not exist answers nil.
func (c *Cluster) offsetFetch(ctx context.Context, req *kafka.OffsetFetchRequest) (*kafka.OffsetFetchResponse, error) {
	resp, err := call(ctx, c, "offset fetch", func(ctx context.Context) (*kafka.OffsetFetchResponse, error) {
		resp, err := c.client.OffsetFetch(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil && retriable(resp.Error) {
			return nil, resp.Error // the coordinator moving or loading
		}
		for t, pos := range resp.Topics {
			for _, po := range pos {
				if po.Error != nil && !errors.Is(po.Error, kafka.UnknownTopicOrPartition) && retriable(po.Error) {
					return nil, fmt.Errorf("%s/%d: %w", t, po.Partition, po.Error)
				}
			}
		}
		return resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read commits of group %s: %w", req.GroupID, err)
	}
	if resp.Error != nil {
		if errors.Is(resp.Error, kafka.GroupIdNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("read commits of group %s: %w", req.GroupID, aclNeeded("offset fetch", resp.Error))
	}
	return resp, nil
}

// Commit stores offsets for the group (OffsetCommit): as m, a joined
// member, or standalone when m is nil (generation -1, no member id: the
// group must have no live members, and the broker rejects the commit when
// it has some, which is the fence against a live group).
//
// A member's commit refused because the member lost its place wraps
// ErrFenced; a standalone commit refused because the group is in use is a
// *GroupInUseError. A commit the coordinator cannot take yet
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// REQUEST_TIMED_OUT), a member's or standalone, is retried (call) with the
// coordinator found again.
//
// Ordering: the caller has at most one Commit of a partition in flight,
// and an attempt whose outcome is unknown (it timed out or its connection
// dropped: it may still reach the coordinator) is retried only after
// RetryPolicy.SettleDelay, when it can no longer land. Committed offsets
// thus never move back, and a Commit that returned leaves no earlier one
// on its way.
func (c *Cluster) Commit(ctx context.Context, m *Member, group, topic string, offsets map[int32]Commit) error {
	parts, err := call(ctx, c, opCommit, func(ctx context.Context) ([]kafka.OffsetCommitPartition, error) {
		parts, err := c.offsetCommit(ctx, m, group, topic, offsets)
		if err != nil {
			return nil, err
		}
		for _, pr := range parts {
			// A member's commit is refused only when the member lost its
			// place (commitErrors); the coordinator moving, loading or
			// timing out is retried, as a standalone commit's.
			if pr.Error != nil && retriable(pr.Error) && !(m != nil && lostPlace(pr.Error)) {
				return nil, fmt.Errorf("%s/%d: %w", topic, pr.Partition, pr.Error) // the coordinator moving or loading
			}
		}
		return parts, nil
	})
	if err != nil {
		return fmt.Errorf("commit to group %s: %w", group, err)
	}
	return commitErrors(m, group, topic, parts)
}

// commitErrors classifies the partitions' errors of a commit's answer.
func commitErrors(m *Member, group, topic string, parts []kafka.OffsetCommitPartition) error {
	var errs []string
	for _, pr := range parts {
		if pr.Error == nil {
			continue
		}
		members := errors.Is(pr.Error, kafka.UnknownMemberId) || errors.Is(pr.Error, kafka.IllegalGeneration) || errors.Is(pr.Error, kafka.RebalanceInProgress)
		if m != nil && lostPlace(pr.Error) {
			// The group moved on: the member rejoins and the partition's
			// owner then delivers the batch again.
			return fmt.Errorf("commit %s/%d to group %s: %w (%v)", topic, pr.Partition, group, ErrFenced, pr.Error)
		}
		if members || errors.Is(pr.Error, kafka.UnsupportedVersion) {
			return &GroupInUseError{Group: group, Op: "commit", Topic: topic, Partition: int32(pr.Partition), Members: members, Err: pr.Error}
		}
		if aerr := aclNeeded(opCommit, pr.Error); aerr != pr.Error {
			return fmt.Errorf("commit to group %s: %s/%d: %w", group, topic, pr.Partition, aerr)
		}
		errs = append(errs, fmt.Sprintf("%s/%d: %v", topic, pr.Partition, pr.Error))
	}
	if len(errs) > 0 {
		return fmt.Errorf("commit to group %s: %s", group, strings.Join(errs, "; "))
	}
	return nil
}

// DeleteOffsets removes the group's commits for parts (OffsetDelete,
// KIP-496). The broker refuses it while the group is in use
// (NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC): that is a
// *GroupInUseError. A group that no longer exists has nothing to delete.
func (c *Cluster) DeleteOffsets(ctx context.Context, group, topic string, parts []int32) error {
	if len(parts) == 0 {
		return nil
	}
	resp, err := call(ctx, c, opDelete, func(ctx context.Context) (*kafka.OffsetDeleteResponse, error) {
		resp, err := c.client.OffsetDelete(ctx, &kafka.OffsetDeleteRequest{GroupID: group, Topics: map[string][]int{topic: ints(parts)}})
		if err == nil && resp.Error != nil && retriable(resp.Error) {
			return nil, resp.Error // the coordinator moving or loading
		}
		return resp, err
	})
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
			return &GroupInUseError{Group: group, Op: "delete", Topic: topic, Partition: -1, Members: true, Err: resp.Error}
		}
		return fmt.Errorf("delete commits of group %s on %s: %w", group, topic, aclNeeded(opDelete, resp.Error))
	}
	var errs []string
	for _, pr := range resp.Topics[topic] {
		acl := aclNeeded(opDelete, pr.Error)
		switch {
		case pr.Error == nil:
		case inUse(pr.Error):
			return &GroupInUseError{Group: group, Op: "delete", Topic: topic, Partition: int32(pr.Partition), Members: true, Err: pr.Error}
		case acl != pr.Error:
			return fmt.Errorf("delete commits of group %s: %s/%d: %w", group, topic, pr.Partition, acl)
		default:
			errs = append(errs, fmt.Sprintf("%s/%d: %v", topic, pr.Partition, pr.Error))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete commits of group %s: %s", group, strings.Join(errs, "; "))
	}
	return nil
}

// Group is a group as its coordinator describes it.
type Group struct {
	// State is the coordinator's state: Empty, Dead, Stable,
	// PreparingRebalance, ... ("" when unknown).
	State string
	// Members are the group's members, of either protocol.
	Members []GroupMember
	// Err is the coordinator's error for the group: its state and members
	// are then unknown.
	Err error
	// Protocol is the group's rebalance protocol: "consumer" for a group
	// of KIP-848's consumer protocol (described by ConsumerGroupDescribe,
	// whose State is then Empty, Assigning, Reconciling, Stable or Dead),
	// else "" (classic, described by DescribeGroups).
	Protocol string
}

// GroupMember is one member of a group.
type GroupMember struct {
	// MemberID is the coordinator's ID of the member.
	MemberID, ClientID, ClientHost string
	// UserData is the user data of a consumer member's subscription
	// (Membership.SetUserData); nil when it has none, for another
	// protocol, and while the group is not Stable.
	UserData []byte
}

// DescribeGroup describes the group (DescribeGroups, through the control
// client, which decodes the members of every client; and
// ConsumerGroupDescribe for a group of KIP-848's consumer protocol); nil
// when the coordinator's answer does not mention it. The coordinator
// moving, loading or dropping the connection is retried (call).
func (c *Cluster) DescribeGroup(ctx context.Context, group string) (*Group, error) {
	cl, err := c.control()
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	resp, err := call(ctx, c, "describe groups", func(ctx context.Context) (*kmsg.DescribeGroupsResponse, error) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		for _, g := range resp.Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); g.Group == group && err != nil && kerr.IsRetriable(err) {
				return nil, err // the coordinator moving or loading
			}
		}
		return resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	var out *Group
	for _, g := range resp.Groups {
		if g.Group != group {
			continue
		}
		out = &Group{State: g.State, Err: kerr.ErrorForCode(g.ErrorCode)}
		for _, m := range g.Members {
			gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			var meta kmsg.ConsumerMemberMetadata
			if g.ProtocolType == protocolType && len(m.ProtocolMetadata) > 0 && meta.ReadFrom(m.ProtocolMetadata) == nil {
				gm.UserData = meta.UserData
			}
			out.Members = append(out.Members, gm)
		}
		break
	}
	// Apache Kafka answers DescribeGroups for a group of the consumer
	// protocol (KIP-848) with GROUP_ID_NOT_FOUND, state Dead, even while
	// the group has live members; some brokers say Stable with no
	// members. Such a group is described by ConsumerGroupDescribe.
	if out == nil || (len(out.Members) == 0 && !strings.EqualFold(out.State, "Empty")) || errors.Is(out.Err, kerr.GroupIDNotFound) {
		cg, err := c.describeConsumerGroup(ctx, cl, group)
		if err != nil {
			return nil, fmt.Errorf("describe group %s: %w", group, err)
		}
		if cg != nil {
			return cg, nil
		}
		if out != nil && errors.Is(out.Err, kerr.GroupIDNotFound) {
			// Neither kind of group: there is none (deleted meanwhile).
			out.State, out.Err = "Dead", nil
		}
	}
	return out, nil
}

// describeConsumerGroup describes group as a group of KIP-848's consumer
// protocol (ConsumerGroupDescribe, through the control client cl and
// call's retries). It returns nil, nil when the group is not one
// (GROUP_ID_NOT_FOUND) or the broker does not know the request (before
// Kafka 3.7).
func (c *Cluster) describeConsumerGroup(ctx context.Context, cl *kgo.Client, group string) (*Group, error) {
	return call(ctx, c, "describe consumer group", func(ctx context.Context) (*Group, error) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			if errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old") {
				return nil, nil
			}
			return nil, err
		}
		for _, g := range resp.Groups {
			if g.Group != group {
				continue
			}
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				switch {
				case errors.Is(err, kerr.GroupIDNotFound), errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.InvalidRequest):
					return nil, nil
				case kerr.IsRetriable(err):
					return nil, err // the coordinator moving or loading
				}
				return &Group{Protocol: "consumer", Err: err}, nil
			}
			out := &Group{State: g.State, Protocol: "consumer"}
			for _, m := range g.Members {
				out.Members = append(out.Members, GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost})
			}
			return out, nil
		}
		return nil, nil
	})
}

// RemoveMember removes a member from the group (LeaveGroup v3+, KIP-345,
// naming its member ID): the coordinator forgets it at once instead of
// after its session timeout. A member the coordinator no longer knows
// (UNKNOWN_MEMBER_ID) is not an error. The coordinator moving, loading or
// dropping the connection is retried (call).
func (c *Cluster) RemoveMember(ctx context.Context, group, memberID string) error {
	cl, err := c.control()
	if err != nil {
		return fmt.Errorf("remove member %s from group %s: %w", memberID, group, err)
	}
	return c.leave(ctx, cl, group, memberID)
}
