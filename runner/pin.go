package runner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/source"
)

// ResolutionFormat names the format of a resolution file, its first field.
const ResolutionFormat = "replay.resolution/v1"

// resolutionFile is the reviewable JSON file `replay plan --out` writes and
// `replay run --resolution` reads: the format, then the Resolution's fields.
type resolutionFile struct {
	Format string `json:"format"`
	*Resolution
}

// MarshalResolution renders res as an indented, reviewable resolution file.
func MarshalResolution(res *Resolution) ([]byte, error) {
	b, err := json.MarshalIndent(resolutionFile{Format: ResolutionFormat, Resolution: res}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ReadResolution reads and checks a resolution file. Unknown fields are an
// error: the file is reviewed and may be edited by hand, and a misspelt
// field must not be ignored silently.
func ReadResolution(path string) (*Resolution, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read resolution: %w", err)
	}
	f := resolutionFile{Resolution: &Resolution{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err = dec.Decode(&f); err == nil {
		err = f.check()
	}
	if err != nil {
		return nil, fmt.Errorf("resolution file %s: %w", path, err)
	}
	return f.Resolution, nil
}

func (f resolutionFile) check() error {
	if f.Format != ResolutionFormat {
		return fmt.Errorf("format %q: want %q (a file written by MarshalResolution)", f.Format, ResolutionFormat)
	}
	r := f.Resolution
	switch {
	case len(r.Topics) > 0 && r.Plan != "" && r.Fingerprint != "" && r.Group != "" && len(r.Ranges) > 0:
		return r.checkTopics()
	case r.Plan == "" || r.Fingerprint == "" || r.Topic == "" || r.Group == "":
		return fmt.Errorf("plan, fingerprint, topic and group are required")
	case len(r.Ranges) == 0:
		return fmt.Errorf("no ranges")
	}
	slices.SortFunc(r.Ranges, func(a, b Range) int { return cmp.Compare(a.Partition, b.Partition) })
	for i, rg := range r.Ranges {
		if rg.Topic != "" {
			return fmt.Errorf("partition %d names topic %s: only the ranges of a resolution of several topics (topics) do", rg.Partition, rg.Topic)
		}
		if i > 0 && r.Ranges[i-1].Partition == rg.Partition {
			return fmt.Errorf("partition %d has two ranges", rg.Partition)
		}
		if rg.Partition < 0 || rg.Start < 0 || rg.Start > rg.End {
			return fmt.Errorf("partition %d: range [%d, %d) is not a valid offset range", rg.Partition, rg.Start, rg.End)
		}
	}
	if r.Shards != nil {
		return r.Shards.check(r.Ranges)
	}
	return nil
}

// pin binds the job to opts.Pinned, a resolution fixed earlier by `replay
// plan --out`, instead of resolving the window again. It refuses
// (*fault.SafetyError) a resolution made for another plan or version of the plan,
// one whose ranges lie outside what the plan's window can resolve to (a
// hand-edited file: checkPinnedRanges), and a group that holds checkpoints of this plan for other ranges (an
// earlier run that was resolved differently: finish or discard it first).
// A range whose start (or checkpoint) retention has deleted since is a
// *RetentionError unless the plan sets allow_data_loss.
func (j preparing) pin(ctx context.Context, all []int32, cps map[int32]group.Checkpoint) error {
	p, pinned := j.Plan, j.opts.Pinned
	if err := checkPinnedPlan(p, pinned); err != nil {
		return err
	}
	if pinned.TopicID != "" && j.topicID != "" && pinned.TopicID != j.topicID {
		return (&group.IncarnationError{Topic: p.Source.Topic, Group: p.Group, Recorded: pinned.TopicID, Now: j.topicID, Where: "the resolution file was written", Pinned: true}).Refuse()
	}
	if err := j.checkPinnedRanges(ctx, all); err != nil {
		return err
	}
	resumable, err := group.Classify(p, cps, j.opts.Restart)
	if err != nil {
		return err
	}
	if resumable {
		if err := samePinnedRanges(p, pinned, cps, j.opts.Join); err != nil {
			return err
		}
	}
	for _, rg := range pinned.Ranges {
		if !slices.Contains(all, rg.Partition) {
			return fmt.Errorf("the resolution pins partition %s/%d, which the topic no longer has (it has %d partitions): was it deleted and created again?", p.Source.Topic, rg.Partition, len(all))
		}
	}
	res := *pinned
	res.Ranges, res.TopicID = slices.Clone(pinned.Ranges), j.topicID
	j.Fresh = !resumable
	if !resumable {
		j.discarded = group.ReplayCommitted(all, cps)
		cps = nil
	}
	if err := j.fixRanges(ctx, all, &res, cps); err != nil {
		return err
	}
	j.warnAdded(addedAmong(j.Plan, j.Resolution, j.Ignored)) // created since the resolution was saved
	return nil
}

// fixRanges binds the job to res's fixed ranges (pinRanges); the other
// partitions of all are ignored.
func (j preparing) fixRanges(ctx context.Context, all []int32, res *Resolution, cps map[int32]group.Checkpoint) error {
	j.Resolution, j.Resume, j.committed = res, map[int32]int64{}, map[int32]held{}
	if err := j.pinRanges(ctx, res.Ranges, cps); err != nil {
		return err
	}
	j.Ignored = append(j.Ignored, slices.DeleteFunc(slices.Clone(all), func(p int32) bool { _, ok := res.rangeOf(p); return ok })...)
	return nil
}

// pinRanges resumes the ranges rgs that have a checkpoint of replay in
// cps, and checks each against its partition's offsets now (pinRange).
func (j preparing) pinRanges(ctx context.Context, rgs []Range, cps map[int32]group.Checkpoint) error {
	offs, err := j.c.ListOffsets(ctx, j.Plan.Source.Topic, partitionsOf(rgs), j.Plan.Source.Isolation)
	if err != nil {
		return err
	}
	for i := range rgs {
		rg := &rgs[i]
		if cp := cps[rg.Partition]; cp.Replay && cp.Offset >= 0 {
			j.resumeAt(rg.Partition, cp)
			rg.Outcome = Resumed
		}
		if err := j.pinRange(ctx, rg, offs[rg.Partition]); err != nil {
			return err
		}
	}
	return nil
}

// pinRange checks one pinned range against the partition's offsets now.
// The range itself never changes (its start and end are what the group's
// checkpoints record); data lost to retention moves where reading begins.
func (j preparing) pinRange(ctx context.Context, rg *Range, o source.Offsets) error {
	topic := j.Plan.Source.Topic
	rg.LogStart, rg.HighWatermark, rg.LastStable = o.LogStart, o.HighWatermark, o.LastStable
	if rg.End > o.HighWatermark {
		return fault.With(fmt.Errorf("partition %s/%d: the pinned range ends at %d but the high watermark is now %d (last stable offset %d): the log was truncated or the topic was created again; resolve the window afresh", topic, rg.Partition, rg.End, o.HighWatermark, o.LastStable), fault.HintResolveAgain)
	}
	from := j.readFrom(*rg)
	if from < rg.End {
		j.c.noteOpenTransaction(ctx, j.Plan, rg)
	}
	if from >= rg.End || from >= o.LogStart {
		return nil
	}
	if !j.Plan.AllowDataLoss {
		first, err := j.c.FirstRecordTime(ctx, topic, rg.Partition, o.LogStart, j.Plan.Source.Isolation)
		if err != nil {
			return err
		}
		return &RetentionError{Topic: topic, Partition: rg.Partition, Start: from, LogStart: o.LogStart, FirstTime: first}
	}
	next := min(o.LogStart, rg.End)
	rg.Lost += next - from
	if rg.Outcome != Resumed {
		rg.Outcome = StartBeforeRetention
	}
	j.Resume[rg.Partition] = next
	return nil
}

// checkPinnedPlan refuses a resolution made for another plan, or for
// another version of this plan (its fingerprint changed since).
func checkPinnedPlan(p *plan.Plan, pinned *Resolution) error {
	fp := p.Fingerprint()
	switch {
	case pinned.Fingerprint != fp || pinned.Plan != p.Name:
		return &fault.SafetyError{Group: p.Group, Hint: fault.HintResolveAgain, Reason: fmt.Sprintf("the resolution file was made for plan %q with fingerprint %s, but this plan is %q with fingerprint %s: the plan changed since the file was written", pinned.Plan, pinned.Fingerprint, p.Name, fp)}
	case pinned.Topic != p.Source.Topic || pinned.Group != p.Group:
		return &fault.SafetyError{Group: p.Group, Reason: fmt.Sprintf("the resolution file is for topic %s and group %s, but the plan names topic %s and group %s", pinned.Topic, pinned.Group, p.Source.Topic, p.Group)}
	}
	return nil
}

// samePinnedRanges checks that this plan's checkpoints in the group record
// exactly the pinned ranges: then the pinned run resumes from them.
func samePinnedRanges(p *plan.Plan, pinned *Resolution, cps map[int32]group.Checkpoint, join bool) error {
	for _, part := range slices.Sorted(maps.Keys(cps)) {
		cp := cps[part]
		if !cp.Replay || cp.Offset < 0 {
			continue
		}
		pin := "no range"
		if r, ok := pinned.rangeOf(part); ok {
			if r.Start == cp.Start && r.End == cp.End {
				continue
			}
			pin = fmt.Sprintf("[%d, %d)", r.Start, r.End)
		}
		hint := fault.HintFinishOrRestart
		if join {
			hint = fault.HintJoinedFile
		}
		return &fault.SafetyError{Group: p.Group, Hint: hint, Reason: fmt.Sprintf("it holds checkpoints of this plan for other ranges than the resolution file pins (partition %d: the group's run has [%d, %d), the file %s): an earlier run of this plan was resolved differently", part, cp.Start, cp.End, pin)}
	}
	return nil
}

// checkPinnedRanges refuses (*fault.SafetyError) a resolution file whose window
// or ranges are not what the plan's window can resolve to: a file edited by
// hand after review, or made for another window. The ranges of a file
// `replay plan --out` wrote always pass, however much the topic grew since:
//   - a time window's bounds must be the plan's, evaluated at the file's
//     resolved_at (which may not lie in the future);
//   - every partition must be one the plan selects;
//   - a range must lie inside the offsets the window gives now: from the
//     first offset stamped at or after from (any start when retention
//     deleted the partition's head since: pinRange decides about that) to
//     the first offset stamped at or after to, or the high watermark; an
//     offsets window's fixed offsets bound its ranges the same way.
//
// An empty range passes anywhere up to the high watermark: it replays
// nothing.
func (j preparing) checkPinnedRanges(ctx context.Context, all []int32) error {
	p, pinned := j.Plan, j.opts.Pinned
	if p.Window.IsSchedule() {
		return nil
	}
	topic := p.Source.Topic
	selected, _, err := selectPartitions(p, all)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, len(pinned.Ranges))
	for _, rg := range pinned.Ranges {
		if !slices.Contains(selected, rg.Partition) {
			if !slices.Contains(all, rg.Partition) {
				continue // pin says the topic lost it
			}
			return pinMisfit(p, "it has a range for partition %s/%d, [%d, %d), which the plan does not select (it selects %v)", topic, rg.Partition, rg.Start, rg.End, selected)
		}
		parts = append(parts, rg.Partition)
	}
	if len(parts) == 0 {
		return nil
	}
	offs, err := j.c.ListOffsets(ctx, topic, parts, plan.ReadUncommitted)
	if err != nil {
		return err
	}
	lo, hi, window, err := pinBounds(ctx, j.c, p, pinned, j.opts.Now(), parts, offs)
	if err != nil {
		return err
	}
	for _, rg := range pinned.Ranges {
		if !slices.Contains(parts, rg.Partition) {
			continue
		}
		l, h := lo[rg.Partition], hi[rg.Partition]
		empty := rg.Start == rg.End && rg.End <= offs[rg.Partition].HighWatermark
		if !empty && (rg.Start < l || rg.End > h) {
			return pinMisfit(p, "partition %s/%d: its range [%d, %d) lies outside [%d, %d), the offsets %s can resolve to now (%d offsets instead of at most %d)",
				topic, rg.Partition, rg.Start, rg.End, l, h, window, rg.End-rg.Start, max(h-l, 0))
		}
	}
	return nil
}

// pinMisfit refuses a resolution file that does not fit the plan's window
// (a *fault.SafetyError with fault.HintResolveAgain).
func pinMisfit(p *plan.Plan, format string, args ...any) error {
	return &fault.SafetyError{Group: p.Group, Hint: fault.HintResolveAgain, Reason: "the resolution file does not fit the plan's window: " + fmt.Sprintf(format, args...) + "; the file was edited after it was written, or was made for another window"}
}

// pinBounds returns, for each of parts, the widest range [lo, hi) the
// plan's window can resolve to now (see checkPinnedRanges), and the window
// as messages name it. offs are the partitions' offsets at now.
func pinBounds(ctx context.Context, c *Cluster, p *plan.Plan, pinned *Resolution, now time.Time, parts []int32, offs map[int32]source.Offsets) (lo, hi map[int32]int64, window string, err error) {
	lo, hi = map[int32]int64{}, map[int32]int64{}
	for _, part := range parts {
		lo[part], hi[part] = 0, offs[part].HighWatermark
	}
	if !p.Window.IsTime() {
		for _, part := range parts {
			w := p.Window.OffsetRangeOf(part)
			if !w.From.Earliest && !w.From.Latest {
				lo[part] = w.From.Offset
			}
			if !w.To.Earliest && !w.To.Latest {
				hi[part] = min(hi[part], w.To.Offset)
			}
		}
		return lo, hi, "the offsets window", nil
	}
	if pinned.ResolvedAt.After(now.Add(time.Minute)) {
		return nil, nil, "", pinMisfit(p, "its resolved_at %s lies in the future", pinned.ResolvedAt.Format(time.RFC3339Nano))
	}
	from, to := p.Window.Bounds(pinned.ResolvedAt)
	if !from.Equal(pinned.From) || !to.Equal(pinned.To) {
		return nil, nil, "", pinMisfit(p, "its window is [%s, %s), but the plan's window resolved at the file's resolved_at %s is [%s, %s)",
			timeOrDash(pinned.From), timeOrDash(pinned.To), pinned.ResolvedAt.Format(time.RFC3339Nano), timeOrDash(from), timeOrDash(to))
	}
	margin := time.Duration(p.Window.SkewMargin)
	topic := p.Source.Topic
	starts, err := c.OffsetsAt(ctx, topic, parts, from.Add(-margin), plan.ReadUncommitted)
	if err != nil {
		return nil, nil, "", err
	}
	for _, part := range parts {
		if s := starts[part]; s >= 0 && s > offs[part].LogStart {
			lo[part] = s // at the log start, retention may have deleted the real start
		}
	}
	if !to.IsZero() {
		ends, err := c.OffsetsAt(ctx, topic, parts, to.Add(margin), plan.ReadUncommitted)
		if err != nil {
			return nil, nil, "", err
		}
		for _, part := range parts {
			if e := ends[part]; e >= 0 {
				hi[part] = min(hi[part], e)
			}
		}
	}
	return lo, hi, fmt.Sprintf("the window [%s, %s)", timeOrDash(from), timeOrDash(to)), nil
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "high watermark"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
