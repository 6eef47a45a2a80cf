package runner

import (
	"slices"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// ReadRunRecord reads this machine's record of p's run on c from dir (see
// Options.StateDir); nil when there is none, or only a reset one.
func ReadRunRecord(dir string, c *Cluster, p *plan.Plan) (*group.RunRecord, error) {
	r, err := group.ReadRecord(dir, c.id(), p)
	if err != nil || !r.Progress() {
		return nil, err
	}
	return r, nil
}

// recordsRuns reports whether a job of schedule interval iv keeps a
// local run record: a plain run of a plan without a schedule, with a
// state directory.
func (o *Options) recordsRuns(iv *plan.Interval) bool {
	return o.StateDir != "" && iv == nil && !o.Join
}

// saveRecord writes the job's run record in state, with next(r) as each
// range's committed offset. A record that cannot be written costs a
// warning: the run itself is not at risk, only the refusal of a later run
// whose group lost its commits.
func (j *Job) saveRecord(state string, next func(Range) int64) {
	if !j.opts.recordsRuns(j.Interval) {
		return
	}
	r := &group.RunRecord{Plan: j.Plan.Name, Fingerprint: j.Resolution.Fingerprint, Group: j.Plan.Group, Topic: j.Resolution.Topic,
		OfTopicSet: j.Plan.OfTopicSet(), ClusterID: j.SourceClusterID(), State: state, ResolvedAt: j.Resolution.ResolvedAt}
	if j.record != nil && j.record.Progress() && slices.EqualFunc(j.record.Ranges, j.Resolution.Ranges, func(a group.RecordedRange, b Range) bool {
		return a.Partition == b.Partition && a.Start == b.Start && a.End == b.End
	}) {
		r.ResolvedAt = j.record.ResolvedAt // the same run, resumed
	}
	for _, rg := range j.Resolution.Ranges {
		r.Ranges = append(r.Ranges, group.RecordedRange{Partition: rg.Partition, Start: rg.Start, End: rg.End, Committed: next(rg)})
	}
	if err := r.Write(j.opts.StateDir); err != nil {
		j.opts.Log.Warn().Err(err).Str("path", r.Path()).Msg("could not write the run record: a later run of this plan cannot tell when the group's commits are gone")
		return
	}
	j.record = r
}

// ForgetRun marks the local record of p's run on c reset (`replay reset`):
// the group's offsets were deleted on purpose, and the next run resolves
// the window afresh instead of refusing. Nothing happens when dir is "".
func ForgetRun(dir string, c *Cluster, p *plan.Plan) error {
	if dir == "" {
		return nil
	}
	r, err := group.ReadRecord(dir, c.id(), p)
	if err != nil || r == nil {
		r = &group.RunRecord{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Topic: p.Source.Topic, OfTopicSet: p.OfTopicSet(), ClusterID: c.id()}
	}
	r.State = group.RecordReset
	return r.Write(dir)
}
