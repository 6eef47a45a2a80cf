// Package runner resolves a plan's window to fixed per-partition offset
// ranges, reads exactly those ranges, hands the records to a sink and
// checkpoints progress in the plan's dedicated replay consumer group.
package runner

import (
	"context"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
)

// Cluster is a connection to the source Kafka cluster (source.Cluster)
// with the plan-level group operations of the command line: Progress,
// CheckReset, Reset, Checkpoints, Schedule. Warnings lists insecure
// settings the caller must show.
type Cluster struct {
	*source.Cluster
}

// id is the cluster's id (Metadata's ClusterID); "" when unknown or
// without a connection.
func (c *Cluster) id() string {
	if c == nil || c.Cluster == nil {
		return ""
	}
	return c.ID
}

// SoftMemoryLimit is a soft limit on the Go runtime's memory (bytes, for
// debug.SetMemoryLimit) that keeps a run's peak RSS under the 64 MiB
// goal: the goal less what is resident besides the Go runtime's memory
// (binaryResident) and a margin, 32 MiB. What a run keeps alive by design
// stays under it with room for the GC: the readers' FetchBudget, up to
// eight decompression buffers of a batch (about 5 MiB for 600 KiB
// batches), the recycled arena chunks (4 MiB), the sink's buffers and the
// runtime, 17-22 MiB live in the benchmarks. The GC then runs every few
// MiB allocated, and the heap between collections stays near the limit
// whatever the batch size, codec or number of partitions.
func SoftMemoryLimit() int64 { return memoryGoal - binaryResident - memoryMargin }

const (
	// memoryGoal is a run's peak RSS goal.
	memoryGoal = 64 << 20
	// binaryResident is the replay binary's own pages a run keeps
	// resident (text and read-only data mapped from the page cache, most
	// touched when its packages initialise: replay --version alone peaks
	// at 29 MiB, about 24 of them the binary's).
	binaryResident = 24 << 20
	// memoryMargin is room for what neither counts: the binary's pages a
	// run touches beyond its start (the kernel maps them 64 KiB at a
	// time: a run that has run its code holds 29-32 MiB of them), the C
	// library, the page tables. The Go runtime's resident part stays a
	// few MiB under the limit (28-29 MiB at the parquet benchmark's
	// peak): what it has freed is returned.
	memoryMargin = 8 << 20
)

// DefaultProbeTimeout bounds the first exchange with the cluster (Connect).
const DefaultProbeTimeout = source.DefaultProbeTimeout

// ConnectOption changes how Connect reaches the cluster.
type ConnectOption = source.ConnectOption

// WithProbeTimeout bounds Connect's first exchange with the cluster (the
// bootstrap probe and the Metadata request); DefaultProbeTimeout otherwise.
func WithProbeTimeout(d time.Duration) ConnectOption { return source.WithProbeTimeout(d) }

// WithRetryOf makes the cluster's broker calls retry what Kafka calls
// retriable as p's retry section says (retry.max_elapsed), as a run's do:
// status and reset ride out a coordinator moving the same way.
func WithRetryOf(p *plan.Plan) ConnectOption {
	return source.WithRetry(source.RetryPolicy{MaxElapsed: time.Duration(p.Retry.MaxElapsed)})
}

// Connect connects to src's cluster and checks that it answers
// (source.Connect): errors say what to fix and never hold the password.
func Connect(ctx context.Context, src plan.Source, opts ...ConnectOption) (*Cluster, error) {
	c, err := source.Connect(ctx, src, opts...)
	if err != nil {
		return nil, err
	}
	return &Cluster{Cluster: c}, nil
}

// PartitionError is a failure of one partition, with the offset the
// partition had reached (everything before it is durable in the sink).
type PartitionError = source.PartitionError

// Gap is a span [From, To) of offsets of the window that were deleted
// before the replay read them.
type Gap = source.Gap

// HoldGroup makes this process the holder of p's replay group
// (group.HoldGroup): a run with the hold (Options.Hold) refuses every
// other run of the plan while it lasts. Release leaves the group.
func HoldGroup(ctx context.Context, c *Cluster, p *plan.Plan) (*group.Hold, error) {
	return group.HoldGroup(ctx, c.Cluster, p)
}

// Checkpoints reads the group's committed offsets for the partitions
// (OffsetFetch, group.Checkpoints). A group that never committed has
// Offset -1 everywhere.
func (c *Cluster) Checkpoints(ctx context.Context, g, topic string, parts []int32) (map[int32]group.Checkpoint, error) {
	return group.Checkpoints(ctx, c.Cluster, g, topic, parts)
}

// checkRunnable refuses (*fault.SafetyError) what every run of p refuses
// before it reads the group: members other than member ("": none), and a
// commit replay did not make on any topic.
func (c *Cluster) checkRunnable(ctx context.Context, p *plan.Plan, member string) error {
	if err := group.CheckMembers(ctx, c.Cluster, p.Group, member); err != nil {
		return err
	}
	return group.CheckRunnable(ctx, c.Cluster, p)
}

// gather reads the topic's partitions and the group g's checkpoints on
// them, what each path of a plan decides from.
func (c *Cluster) gather(ctx context.Context, p *plan.Plan, g string) (all []int32, cps map[int32]group.Checkpoint, err error) {
	if all, err = c.Partitions(ctx, p.Source.Topic); err != nil {
		return nil, nil, err
	}
	if cps, err = c.Checkpoints(ctx, g, p.Source.Topic, all); err != nil {
		return nil, nil, err
	}
	return all, cps, nil
}
