package runner

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// JoinResolutions makes the resolution of a plan of several topics from
// its topics' (one each, in the plan's order): Topics lists them, TopicIDs
// holds their IDs, and Ranges every topic's ranges, each naming its topic.
// ResolvedAt is the earliest of theirs.
func JoinResolutions(p *plan.Plan, parts []*Resolution) *Resolution {
	out := &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, TopicIDs: map[string]string{}}
	for i, r := range parts {
		if i == 0 || r.ResolvedAt.Before(out.ResolvedAt) {
			out.ResolvedAt = r.ResolvedAt
		}
		out.From, out.To = r.From, r.To
		out.Topics = append(out.Topics, r.Topic)
		if r.TopicID != "" {
			out.TopicIDs[r.Topic] = r.TopicID
		}
		for _, rg := range r.Ranges {
			rg.Topic = r.Topic
			out.Ranges = append(out.Ranges, rg)
		}
	}
	if len(out.TopicIDs) == 0 {
		out.TopicIDs = nil
	}
	return out
}

// OfTopic returns the resolution of topic, one of the topics of a
// resolution of several (JoinResolutions): its ranges, its ID. A
// resolution of one topic is returned as it is for that topic.
func (r *Resolution) OfTopic(topic string) (*Resolution, error) {
	if len(r.Topics) == 0 {
		if r.Topic != topic {
			return nil, fmt.Errorf("the resolution is of topic %s, not %s", r.Topic, topic)
		}
		return r, nil
	}
	if !slices.Contains(r.Topics, topic) {
		return nil, fmt.Errorf("the resolution is of topics %v, not %s: the plan's topics changed since it was written", r.Topics, topic)
	}
	out := *r
	out.Topic, out.TopicID, out.Topics, out.TopicIDs, out.Ranges = topic, r.TopicIDs[topic], nil, nil, nil
	for _, rg := range r.Ranges {
		if rg.Topic == topic {
			rg.Topic = ""
			out.Ranges = append(out.Ranges, rg)
		}
	}
	return &out, nil
}

// checkTopics checks the ranges of a resolution of several topics: each
// names one of its topics, each topic partition has one range. It sorts
// them by topic (in the plan's order), then partition.
func (r *Resolution) checkTopics() error {
	switch {
	case r.Topic != "":
		return fmt.Errorf("topic and topics are both set: a resolution is of one topic or of several")
	case r.Shards != nil:
		return fmt.Errorf("shards of a plan of several topics: run each shard of one topic's plan instead")
	}
	for i, t := range r.Topics {
		if slices.Contains(r.Topics[:i], t) {
			return fmt.Errorf("topic %s is listed twice", t)
		}
	}
	tp := func(rg Range) record.TopicPartition {
		return record.TopicPartition{Topic: rg.Topic, Partition: rg.Partition}
	}
	slices.SortFunc(r.Ranges, func(a, b Range) int { // by the topic's position in Topics, then partition
		return cmp.Or(cmp.Compare(slices.Index(r.Topics, a.Topic), slices.Index(r.Topics, b.Topic)), cmp.Compare(a.Partition, b.Partition))
	})
	for i, rg := range r.Ranges {
		switch {
		case !slices.Contains(r.Topics, rg.Topic):
			return fmt.Errorf("range of partition %s: %q is not one of the resolution's topics %v", tp(rg), rg.Topic, r.Topics)
		case i > 0 && tp(r.Ranges[i-1]) == tp(rg):
			return fmt.Errorf("partition %s has two ranges", tp(rg))
		case rg.Partition < 0 || rg.Start < 0 || rg.Start > rg.End:
			return fmt.Errorf("partition %s: range [%d, %d) is not a valid offset range", tp(rg), rg.Start, rg.End)
		}
	}
	for _, t := range r.Topics {
		if !slices.ContainsFunc(r.Ranges, func(rg Range) bool { return rg.Topic == t }) {
			return fmt.Errorf("topic %s has no ranges", t)
		}
	}
	return nil
}

// JoinReports makes the report of a run of a plan of several topics from
// its topics' reports (in the plan's order; a topic not reached has
// none): Topics lists the topics, Partitions every topic's partitions,
// each naming its topic, and the counts are sums. It is nothing to do
// and published when every topic's is.
func JoinReports(p *plan.Plan, reps []*Report) *Report {
	out := &Report{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Sink: string(p.Sink.Type), Topics: p.Topics(),
		NothingToDo: len(reps) == len(p.Source.Topics), Published: len(reps) == len(p.Source.Topics), Partitions: []PartitionReport{}}
	for i, r := range reps {
		if i == 0 {
			out.PlanFile, out.From, out.To, out.Started = r.PlanFile, r.From, r.To, r.Started
		}
		out.Finished = r.Finished
		out.NothingToDo = out.NothingToDo && r.NothingToDo
		out.Published = out.Published && r.Published
		if r.Error != "" {
			out.Error = r.Error
		}
		for _, pr := range r.Partitions {
			pr.Topic = r.Topic
			out.Partitions = append(out.Partitions, pr)
		}
		out.SinkOutcomes = addOutcomes(out.SinkOutcomes, r.SinkOutcomes)
		out.DeadLetterOutcomes = addOutcomes(out.DeadLetterOutcomes, r.DeadLetterOutcomes)
		out.SourceRetries = max(out.SourceRetries, r.SourceRetries) // the cluster's, since it was connected
		out.SinkRetries += r.SinkRetries
		out.DeadLetterRetries += r.DeadLetterRetries
		out.Schemas = joinSchemas(out.Schemas, r.Schemas)
	}
	return out
}

// addOutcomes returns the sum of a and b, nil when both are.
func addOutcomes(a, b *sinks.Outcomes) *sinks.Outcomes {
	switch {
	case b == nil:
		return a
	case a == nil:
		return new(*b)
	}
	a.Add(*b)
	return a
}

// joinSchemas adds b's counts to a's, side and schema id by side and
// schema id, values first, then by schema id.
func joinSchemas(a, b []decode.SchemaCount) []decode.SchemaCount {
	for _, c := range b {
		i := slices.IndexFunc(a, func(x decode.SchemaCount) bool { return x.Side == c.Side && x.SchemaID == c.SchemaID })
		if i < 0 {
			a = append(a, c)
			continue
		}
		a[i].Records += c.Records
	}
	slices.SortFunc(a, func(x, y decode.SchemaCount) int {
		return cmp.Or(cmp.Compare(y.Side, x.Side), cmp.Compare(x.SchemaID, y.SchemaID)) // "value" > "key"
	})
	return a
}

// JoinProgress makes the progress of a plan of several topics from its
// topics' (in the plan's order): Topics lists them, Partitions every
// topic's partitions, each naming its topic, and the totals are sums. Its
// state is the first topic's that says the plan cannot run (foreign,
// another plan's), else done when every topic is done, not started when
// none started, and in progress otherwise.
func JoinProgress(p *plan.Plan, prs []*Progress) *Progress {
	out := &Progress{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, Topics: p.Topics(), Partitions: []PartitionProgress{}}
	done, notStarted := 0, 0
	for i, pr := range prs {
		if i == 0 {
			out.GroupState, out.Holder, out.HolderGone, out.Members, out.CheckedAt = pr.GroupState, pr.Holder, pr.HolderGone, pr.Members, pr.CheckedAt
		}
		for _, pp := range pr.Partitions {
			pp.Topic = pr.Topic
			out.Partitions = append(out.Partitions, pp)
		}
		out.Records += pr.Records
		out.Replayed += pr.Replayed
		out.Remaining += pr.Remaining
		switch pr.State {
		case StateForeign, StateOtherPlan:
			if out.State == "" {
				out.State, out.OtherPlan, out.OtherFingerprint, out.Foreign = pr.State, pr.OtherPlan, pr.OtherFingerprint, pr.Foreign
			}
		case StateDone:
			done++
		case StateNotStarted:
			notStarted++
		}
	}
	switch {
	case out.State != "":
	case done == len(prs):
		out.State = StateDone
	case notStarted == len(prs):
		out.State = StateNotStarted
	default:
		out.State = StateInProgress
	}
	out.PercentDone = percent(out.Replayed, out.Records)
	out.ETA = "unthrottled"
	if d, ok := ETA(p.Throttle, out.Remaining, 0); ok {
		out.ETA = d.String()
	}
	return out
}

// Pending is the report of a prepared job that did not run (a topic of a
// plan of several that a run stopped before): its ranges, each from where
// a run would read it, nothing read or written.
func (j *Job) Pending() *Report {
	rep := j.newReport()
	rep.Finished = rep.Started
	for _, rg := range j.Resolution.Ranges {
		from := j.readFrom(rg)
		rep.Partitions = append(rep.Partitions, PartitionReport{Partition: rg.Partition, Outcome: rg.Outcome,
			Start: rg.Start, End: rg.End, From: from, Next: from})
	}
	return rep
}
