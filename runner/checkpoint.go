package runner

import (
	"context"

	"github.com/replay-tool/replay/runner/group"
)

// Checkpoints reads the group's committed offsets for the partitions
// (OffsetFetch, group.Checkpoints). A group that never committed has
// Offset -1 everywhere.
func (c *Cluster) Checkpoints(ctx context.Context, g, topic string, parts []int32) (map[int32]group.Checkpoint, error) {
	return group.Checkpoints(ctx, c.Cluster, g, topic, parts)
}
