package source

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// JoinConfig is how a process joins a group to share a topic's partitions
// with other processes (the classic group protocol, range assignment).
type JoinConfig struct {
	Group, Topic string
	// ClientID is sent with every request of the membership: how the
	// members tell their peers from other consumers.
	ClientID string
	// Heartbeat, SessionTimeout and RebalanceTimeout are the group
	// protocol's timeouts; kafka-go's defaults when zero.
	Heartbeat, SessionTimeout, RebalanceTimeout time.Duration
}

// Membership is this process's membership of a group: a sequence of
// generations, each with the partitions assigned to it.
type Membership struct {
	cg    *kafka.ConsumerGroup
	topic string
}

// Generation is one generation of a Membership.
type Generation struct {
	Member
	// Partitions are the topic's partitions assigned to this member, sorted.
	Partitions []int32
	gen        *kafka.Generation
}

// ForeignMemberError is a join that met a member it cannot decode, as the
// group's leader: not a member of the same kind as this one.
type ForeignMemberError struct{ Err error }

func (e *ForeignMemberError) Error() string {
	return strings.ReplaceAll(e.Err.Error(), ": %!w(<nil>)", "")
}

func (e *ForeignMemberError) Unwrap() error { return e.Err }

// Join starts a membership of cfg.Group; it joins on the first Next.
func (c *Cluster) Join(cfg JoinConfig) (*Membership, error) {
	dialer := *c.dialer
	dialer.ClientID = cfg.ClientID
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: cfg.Group, Brokers: c.Brokers, Dialer: &dialer, Topics: []string{cfg.Topic},
		HeartbeatInterval: cfg.Heartbeat, SessionTimeout: cfg.SessionTimeout, RebalanceTimeout: cfg.RebalanceTimeout,
		StartOffset: kafka.FirstOffset,
	})
	if err != nil {
		return nil, fmt.Errorf("join group %s: %w", cfg.Group, err)
	}
	return &Membership{cg: cg, topic: cfg.Topic}, nil
}

// Next waits for the next generation. Each failed attempt to join comes
// back as an error (Retriable tells those that may pass); a member the
// leader cannot decode is a *ForeignMemberError.
func (m *Membership) Next(ctx context.Context) (*Generation, error) {
	gen, err := m.cg.Next(ctx)
	if err != nil {
		if strings.Contains(err.Error(), "unable to read metadata for member") {
			return nil, &ForeignMemberError{Err: err}
		}
		return nil, err
	}
	g := &Generation{Member: Member{Generation: gen.ID, ID: gen.MemberID}, gen: gen}
	for _, pa := range gen.Assignments[m.topic] {
		g.Partitions = append(g.Partitions, int32(pa.ID))
	}
	slices.Sort(g.Partitions)
	return g, nil
}

// Start runs fn for the generation: its context ends when the generation
// does (a rebalance). The generation stays the member's until fn returns;
// a member whose function returns early rejoins, which rebalances the
// whole group.
func (g *Generation) Start(fn func(ctx context.Context)) { g.gen.Start(fn) }

// Close leaves the group: the other members take over at once.
func (m *Membership) Close() error { return m.cg.Close() }
