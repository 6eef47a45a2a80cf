package sqlite

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// ResumeError is a SQLite sink's refusal to resume (CheckResume): the
// replay group records Partition as replayed up to offset Committed, but
// the database file or the table did not exist when this process opened
// the sink, so the table lacks the rows written before that offset.
type ResumeError struct {
	// Partition, Committed, Start and End are the first partition replayed
	// past its start: its committed offset and its range [Start, End).
	Partition             int32
	Committed, Start, End int64
	// Missing says what did not exist, naming the database's absolute path.
	Missing string
}

// Error says what is missing and the ways out: run from the first run's
// working directory, restore the database, or replay the window from its
// start (the caller words how: the runner's refusal carries a restart
// hint).
func (e *ResumeError) Error() string {
	return fmt.Sprintf("sqlite sink: the replay group records partition %d as replayed up to offset %d (its range is [%d, %d)), but %s: "+
		"the table would lack the rows written before that offset. Run replay from the working directory of the first run "+
		"(a relative database path is resolved against it) or restore the database; or replay the window again from its start",
		e.Partition, e.Committed, e.Start, e.End, e.Missing)
}

// CheckResume implements Resumer: the rows of a partition replayed past its
// start by an earlier process are in the database, unless the database file
// or the table did not exist when this process opened the sink (a relative
// path resolved against another working directory than the first run's, a
// database or table deleted since). Rows are not counted: a mapped table
// need not have a partition or offset column, and rows of other runs may
// share it. It returns a *ResumeError then.
//
// Refusing, it drops the table this process created (still empty), so
// that a retry of the same run (a scheduler's) finds the table missing
// again and is refused again, instead of taking the empty table it left
// for the one the earlier rows are in. A database file it created stays
// (empty but for the checkpoint table): removing a file another process
// may have opened meanwhile could lose that process's rows.
func (s *Sink) CheckResume(points []sinks.ResumePoint) error {
	if s.created == "" {
		return nil
	}
	for _, p := range points {
		if p.Committed > p.Start {
			s.undoCreate()
			return &ResumeError{Partition: p.Partition, Committed: p.Committed, Start: p.Start, End: p.End, Missing: s.created}
		}
	}
	return nil
}

// undoCreate drops the table this process created, while it is empty. The
// check and the drop are one write transaction (BEGIN IMMEDIATE, the
// DSN's): a row another process inserts is either seen, and the table
// kept, or waits until the table is gone.
func (s *Sink) undoCreate() {
	if !s.createdTable {
		return
	}
	err := func() error {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }() // a no-op after Commit
		var empty bool
		if err := tx.QueryRow(`SELECT NOT EXISTS (SELECT 1 FROM ` + s.table + `)`).Scan(&empty); err != nil || !empty {
			return err
		}
		if _, err := tx.Exec(`DROP TABLE ` + s.table); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil {
		s.log.Warn().Err(err).Str("table", s.name).Msg("could not drop the table this run created before refusing to resume; drop it by hand")
	}
}

// SyncedPosition implements Positioner: the offset after the last batch
// of partition the sink committed (its checkpoint, with a checkpoint
// table), or what the resumed run's commits recorded; 0 when nothing is
// known.
func (s *Sink) SyncedPosition(partition int32) int64 { return s.pos.Of(partition) }

// Reconcile implements Reconciler (sqlcheckpoint.Reconcile), after
// CheckResume refused a database or table this process created: where the
// partitions whose rows the table no longer holds (a table emptied, a
// database file restored from a copy) start again.
func (s *Sink) Reconcile(ctx context.Context, group, topic string, points []sinks.ResumePoint) ([]sinks.Rewind, error) {
	f := sqlcheckpoint.Facts{Table: s.name, Created: s.created != ""}
	if s.ckpt != nil {
		f.CheckpointTable = s.ckpt.Name
	}
	return sqlcheckpoint.Reconcile(points, f, &s.pos, func() (rows bool, err error) {
		if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table+`)`).Scan(&rows); err != nil {
			return false, fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
		}
		return rows, nil
	}, func() (map[int32]int64, error) { return s.Checkpoints(ctx, group, topic) },
		func(partition int32) error {
			return s.execCheckpoints(ctx, fmt.Sprintf("reset the checkpoint of partition %d", partition), s.ckpt.ResetPartition, group, topic, int64(partition))
		})
}

// execCheckpoints runs stmt on the checkpoint table once the writer's
// transaction (if any) is over; what the statement does is for errors.
func (s *Sink) execCheckpoints(ctx context.Context, what, stmt string, args ...any) error {
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return fmt.Errorf("sqlite sink: %s in %s: %w", what, s.ckpt.Name, ctx.Err())
	}
	if _, err := s.db.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("sqlite sink: %s in %s: %w", what, s.ckpt.Name, err)
	}
	return nil
}

// Checkpoints returns the offsets the sink's checkpoint table holds for
// group and topic, written by this run (sqlcheckpoint.Config.RunID); none
// without a checkpoint table.
func (s *Sink) Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if s.ckpt == nil {
		return nil, nil
	}
	out, err := s.ckpt.Read(ctx, s.db, group, topic)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: read checkpoints from %s: %w", s.ckpt.Name, err)
	}
	return out, nil
}

// ResetCheckpoints deletes the checkpoints of group and topic.
func (s *Sink) ResetCheckpoints(ctx context.Context, group, topic string) error {
	if s.ckpt == nil {
		return nil
	}
	return s.execCheckpoints(ctx, "reset checkpoints", s.ckpt.Reset, group, topic)
}
