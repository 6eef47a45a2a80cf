package runner

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/sinks"
)

// checkResume refuses (*SafetyError) to resume a run whose earlier output
// the sink, or the dead-letter sink, no longer holds (sinks.Resumer): the
// staging of a file sink deleted or found through a relative path from
// another working directory, a SQLite database created afresh. Resuming
// would write the remainder of the window only and publish a partial
// output. It runs before anything is committed or written; a fresh run has
// nothing to check.
func (j *Job) checkResume(sink sinks.Sink) error {
	if j.Fresh || len(j.committed) == 0 {
		return nil
	}
	points := make([]sinks.ResumePoint, 0, len(j.Resolution.Ranges))
	for _, r := range j.Resolution.Ranges {
		committed, ok := j.committed[r.Partition]
		if !ok {
			committed = r.Start
		}
		points = append(points, sinks.ResumePoint{Partition: r.Partition, Start: r.Start, Committed: committed, End: r.End,
			Position: j.positions[r.Partition]})
	}
	for _, s := range []struct {
		what string
		sink sinks.Sink
		pos  map[int32]int64
	}{{"", sink, j.positions}, {"dead letters: ", j.DeadLetters, j.dlPositions}} {
		rs := sinks.CapabilitiesOf(s.sink).Resumer
		if rs == nil {
			continue
		}
		for i := range points {
			points[i].Position = s.pos[points[i].Partition]
		}
		if err := rs.CheckResume(points); err != nil {
			return &SafetyError{Group: j.Plan.Group, Reason: fmt.Sprintf("it records a run of plan %s that cannot resume: %s%v", j.Plan.Name, s.what, err)}
		}
	}
	return nil
}

// syncStarts makes a sink that batches durability (sinks.Syncer) hold
// what commitStarts is about to commit past the group's checkpoint (a
// start moved past records lost to retention, with allow_data_loss): the
// file sink then has the partition's staging file, empty, which
// CheckResume looks for on the next resume.
func (j *Job) syncStarts(ctx context.Context, sink sinks.Sink) error {
	for _, r := range j.Resolution.Ranges {
		held, ok := j.committed[r.Partition]
		if !ok {
			held = r.Start
		}
		if j.from(r) <= held {
			continue
		}
		for _, s := range []struct {
			what string
			sink sinks.Sink
		}{{"sink " + j.Plan.Sink.Type, sink}, {"dead-letter sink", j.DeadLetters}} {
			if sy := sinks.CapabilitiesOf(s.sink).Syncer; sy != nil {
				if err := sy.Sync(ctx, r.Partition); err != nil {
					return fmt.Errorf("%s: sync partition %d: %w", s.what, r.Partition, err)
				}
			}
		}
	}
	return nil
}
