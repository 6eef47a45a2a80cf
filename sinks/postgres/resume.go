package postgres

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// SyncedPosition implements Positioner: the offset after the last batch
// of partition the sink committed (its checkpoint, with a checkpoint
// table), or what the resumed run's commits recorded; 0 when nothing is
// known.
func (s *Sink) SyncedPosition(partition int32) int64 { return s.pos.Of(partition) }

// Reconcile implements Reconciler: it finds whether the table still holds
// what the group's commits recorded as written (sqlcheckpoint.Rewinds: the
// table created by this process or empty, a checkpoint behind the
// recorded position) and returns where the partitions it lost start
// again. The checkpoints of the partitions that start again at their range
// start are deleted, so that the checkpoint left by the lost rows does not
// make a later resume skip past them (the runner's resume from the sink's
// checkpoints).
func (s *Sink) Reconcile(ctx context.Context, group, topic string, points []sinks.ResumePoint) ([]sinks.Rewind, error) {
	f := sqlcheckpoint.Facts{Table: s.name, Created: s.created}
	if !f.Created {
		var rows bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table+")").Scan(&rows); err != nil {
			return nil, fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
		}
		f.Empty = !rows
	}
	if s.ckpt != nil {
		cps, err := s.Checkpoints(ctx, group, topic)
		if err != nil {
			return nil, err
		}
		f.Checkpoints, f.CheckpointTable = cps, s.ckpt.Name
	}
	rewinds := sqlcheckpoint.Rewinds(points, f)
	for _, rw := range rewinds {
		if s.ckpt == nil || rw.Position > 0 {
			continue
		}
		if _, err := s.pool.Exec(ctx, s.ckpt.ResetPartition, group, topic, rw.Partition); err != nil {
			return nil, fmt.Errorf("postgres sink: reset the checkpoint of partition %d in %s: %w", rw.Partition, s.ckpt.Name, s.scrub(err))
		}
	}
	s.pos.Seed(points, rewinds)
	return rewinds, nil
}
