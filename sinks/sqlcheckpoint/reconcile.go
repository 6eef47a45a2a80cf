package sqlcheckpoint

import (
	"fmt"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Positions is what a database sink reports as durable per partition
// (sinks.Positioner): the offset after the last batch of the partition it
// committed, or what a resumed run's commits recorded before this process
// wrote. With a checkpoint table that is the partition's checkpoint. Safe
// for concurrent use.
type Positions struct {
	mu  sync.Mutex
	pos map[int32]int64
}

// Wrote records batch (not empty), committed in the sink's transaction.
func (p *Positions) Wrote(batch []record.Record) {
	_, part, next := checkpointBatch(batch)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pos == nil {
		p.pos = map[int32]int64{}
	}
	p.pos[part] = max(p.pos[part], next)
}

// Seed sets the positions a resumed run starts from: each partition's
// recorded position, or its rewind's.
func (p *Positions) Seed(points []sinks.ResumePoint, rewinds []sinks.Rewind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pos = map[int32]int64{}
	for _, pt := range points {
		p.pos[pt.Partition] = pt.Position
	}
	for _, rw := range rewinds {
		p.pos[rw.Partition] = rw.Position
	}
}

// Of is partition's position; 0 when nothing is known.
func (p *Positions) Of(partition int32) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[partition]
}

// Facts is what a database sink found about its table when a run resumed.
type Facts struct {
	// Table is the sink's table, for the reasons.
	Table string
	// Created: the table did not exist when this process opened the sink
	// (create_table created it, empty). Empty: the table holds no row.
	Created, Empty bool
	// Checkpoints are the run's checkpoints (Read), CheckpointTable the
	// table they are in; nil and "" without a checkpoint table.
	Checkpoints     map[int32]int64
	CheckpointTable string
}

// Rewinds decides, from the facts a sink found, which partitions of a
// resumed run it no longer holds up to the group's commit
// (sinks.Reconciler), and where each must start again:
//
//   - a table created by this process, or empty while the commits recorded
//     rows written (a position): the table holds nothing of the run, every
//     partition replayed past its start starts again at its start;
//   - a partition whose commit recorded rows written up to a position
//     beyond the checkpoint the table holds now (a restore from a backup, a
//     replica that lagged): the rows of the checkpoint's transaction and
//     those before it are there (same transaction), so it starts again at
//     the checkpoint; without a checkpoint of the run, at its start.
//
// A partition whose commit recorded no position (nothing written, all
// filtered out; or a commit of an earlier version) is left where it is,
// unless the table holds nothing.
func Rewinds(points []sinks.ResumePoint, f Facts) []sinks.Rewind {
	var past []sinks.ResumePoint
	wrote := false
	for _, p := range points {
		if p.Committed > p.Start {
			past = append(past, p)
			wrote = wrote || p.Position > 0
		}
	}
	lost := ""
	switch {
	case f.Created:
		lost = fmt.Sprintf("the table %s did not exist when this run opened it (create_table created it, empty): it was dropped, or the DSN names another database", f.Table)
	case f.Empty && wrote:
		lost = fmt.Sprintf("the table %s holds no row: it was truncated, dropped and created again, or restored from a backup taken before the run", f.Table)
	}
	var out []sinks.Rewind
	for _, p := range past {
		at := fmt.Sprintf("the replay group records partition %d as replayed up to offset %d (its range is [%d, %d))", p.Partition, p.Committed, p.Start, p.End)
		cp, ok := f.Checkpoints[p.Partition]
		switch {
		case lost != "":
			out = append(out, sinks.Rewind{Partition: p.Partition, From: p.Start, Reason: at + ", but " + lost})
		case f.Checkpoints == nil || p.Position <= 0 || ok && cp >= p.Position:
		case !ok || cp <= p.Start:
			out = append(out, sinks.Rewind{Partition: p.Partition, From: p.Start, Reason: fmt.Sprintf(
				"%s with rows written up to offset %d, but the checkpoint table %s holds no checkpoint of this run for it: the tables were restored from a backup taken before the run, or a replica that lagged took over",
				at, p.Position, f.CheckpointTable)})
		default:
			out = append(out, sinks.Rewind{Partition: p.Partition, From: cp, Position: cp, Reason: fmt.Sprintf(
				"%s with rows written up to offset %d, but the checkpoint table %s, written in the same transactions as the rows, holds offset %d: the tables were restored from a backup, or a replica that lagged took over",
				at, p.Position, f.CheckpointTable, cp)})
		}
	}
	return out
}

// Reconcile is a database sink's sinks.Reconciler: it completes f (Table,
// Created and CheckpointTable set) with whether the table holds a row
// (hasRows, unless Created) and the run's checkpoints (read; nil without
// a checkpoint table), and returns Rewinds. The checkpoints of the
// partitions that start again at their range start are deleted
// (resetPartition, with a checkpoint table), so that the checkpoint left
// by the lost rows does not make a later resume skip past them; pos is
// seeded with the resumed positions.
func Reconcile(points []sinks.ResumePoint, f Facts, pos *Positions, hasRows func() (bool, error),
	read func() (map[int32]int64, error), resetPartition func(partition int32) error) ([]sinks.Rewind, error) {
	if !f.Created {
		rows, err := hasRows()
		if err != nil {
			return nil, err
		}
		f.Empty = !rows
	}
	var err error
	if f.Checkpoints, err = read(); err != nil {
		return nil, err
	}
	rewinds := Rewinds(points, f)
	for _, rw := range rewinds {
		if f.CheckpointTable == "" || rw.Position > 0 {
			continue
		}
		if err := resetPartition(rw.Partition); err != nil {
			return nil, err
		}
	}
	pos.Seed(points, rewinds)
	return rewinds, nil
}
