package runner

import (
	"context"
	"fmt"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// resumeFromSink reconciles the Kafka commits with the checkpoints a sink
// keeps in its own transactions (sinks.CheckpointStore, a database sink with
// checkpoint_table). A Kafka commit that failed after the sink committed a
// batch lags what the sink holds: each partition then starts at the sink's
// checkpoint instead, so nothing the sink holds is delivered again, and
// that start is committed to the group before anything is read.
//
// It runs after commitStarts (which fenced the group) and before the
// partitions start. A fresh run resets the sink's checkpoints instead: the
// previous run's (possibly of the same identity, after --restart) must not
// skip this run's records. With on_error: dead_letter the sink's
// checkpoints are not used, since dead letters are written after the
// sink's transaction and a checkpoint past them could lose them.
func (j *Job) resumeFromSink(ctx context.Context, sink sinks.Sink, states []*partitionState) error {
	store := sink.Capabilities().Checkpoints
	if store == nil {
		return nil
	}
	group, topic := j.Plan.Group, j.Resolution.Topic
	if j.Fresh {
		if err := store.ResetCheckpoints(ctx, group, topic); err != nil {
			return fmt.Errorf("reset the sink's checkpoints: %w", err)
		}
		return nil
	}
	if j.Plan.OnError == plan.OnErrorDeadLetter {
		return nil
	}
	cps, err := store.Checkpoints(ctx, group, topic)
	if err != nil {
		return fmt.Errorf("read the sink's checkpoints: %w", err)
	}
	offsets := map[int32]int64{}
	meta := map[int32]checkpointMeta{}
	for _, s := range states {
		next, ok := cps[s.Partition]
		if !ok || next <= s.from || next > s.End {
			continue // behind the Kafka commit, or not this range's
		}
		j.opts.Log.Info().Str("topic", topic).Int32("partition", s.Partition).Int64("kafka_commit", s.from).
			Int64("sink_checkpoint", next).Msg("the sink holds records past the Kafka commit: resuming after them")
		s.from = next
		if j.Resume == nil {
			j.Resume = map[int32]int64{}
		}
		j.Resume[s.Partition] = next
		offsets[s.Partition], meta[s.Partition] = next, j.meta(s.Range)
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := j.c.commit(ctx, group, topic, offsets, meta); err != nil {
		return fmt.Errorf("commit the sink's checkpoints to group %s: %w", group, err)
	}
	return nil
}
