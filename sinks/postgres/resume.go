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

// Reconcile implements Reconciler (sqlcheckpoint.Reconcile): where the
// partitions whose rows the table no longer holds start again.
func (s *Sink) Reconcile(ctx context.Context, group, topic string, points []sinks.ResumePoint) ([]sinks.Rewind, error) {
	f := sqlcheckpoint.Facts{Table: s.name, Created: s.created}
	if s.ckpt != nil {
		f.CheckpointTable = s.ckpt.Name
	}
	return sqlcheckpoint.Reconcile(points, f, &s.pos, func() (bool, error) { return s.hasRows(ctx) },
		func() (map[int32]int64, error) { return s.Checkpoints(ctx, group, topic) },
		func(partition int32) error {
			if _, err := s.pool.Exec(ctx, s.ckpt.ResetPartition, group, topic, partition); err != nil {
				return fmt.Errorf("postgres sink: reset the checkpoint of partition %d in %s: %w", partition, s.ckpt.Name, s.scrub(err))
			}
			return nil
		})
}

// hasRows reports whether the table holds a row.
func (s *Sink) hasRows(ctx context.Context) (rows bool, err error) {
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table+")").Scan(&rows); err != nil {
		return false, fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	return rows, nil
}
