package runner

import (
	"context"
	"slices"
	"time"
)

// selects reports whether the plan reads partition part of its topic.
func (j *Job) selects(part int32) bool {
	p := j.Plan
	switch {
	case len(p.Window.Offsets) > 0:
		_, ok := p.Window.Offsets[part]
		return ok
	case p.Source.Partitions.All || len(p.Source.Partitions.List) == 0:
		return true
	}
	return slices.Contains(p.Source.Partitions.List, part)
}

// addedAmong returns the partitions of parts that the plan selects and
// that have no range: they were created after the ranges were resolved.
func (j *Job) addedAmong(parts []int32) []int32 {
	var added []int32
	for _, part := range parts {
		if j.selects(part) && !slices.ContainsFunc(j.Resolution.Ranges, func(r Range) bool { return r.Partition == part }) {
			added = append(added, part)
		}
	}
	return added
}

// addedSince lists the partitions created while the job ran (or since it
// was resolved), in addition to j.Added, and warns about the new ones.
// The run never reads them: the ranges are fixed. A failed metadata
// request only costs the warning.
func (j *Job) addedSince(ctx context.Context) []int32 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	all, err := j.c.FreshPartitions(ctx, j.Resolution.Topic)
	if err != nil {
		j.opts.Log.Debug().Err(err).Msg("list partitions after the run")
		return j.Added
	}
	var fresh []int32
	for _, part := range j.addedAmong(all) {
		if !slices.Contains(j.Added, part) {
			fresh = append(fresh, part)
		}
	}
	j.warnAdded(fresh)
	return slices.Sorted(slices.Values(j.Added))
}

func (j *Job) warnAdded(added []int32) {
	if len(added) == 0 {
		return
	}
	j.Added = append(j.Added, added...)
	j.opts.Log.Warn().Str("plan", j.Plan.Name).Str("topic", j.Resolution.Topic).Ints32("partitions", added).
		Msg("partitions were added to the topic after the run was resolved: this run does not read them (the ranges are fixed); replay them with another plan if the window needs them")
}
