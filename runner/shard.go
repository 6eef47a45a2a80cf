package runner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
)

// Shards: a resolution's ranges split for several processes (replay plan
// --shards N), each replaying its own sub-ranges with its own replay group
// (replay run --shard I/N), so that the group's commits hold each shard's
// progress and a shard resumes alone.

// ShardSet is a resolution's ranges split into Count shards of about equal
// offsets. It is part of the resolution file, reviewed with it.
type ShardSet struct {
	Count int `json:"count"`
	// Fingerprint is ShardFingerprint of the resolution: a file whose
	// ranges or shards were edited after it was written is refused.
	Fingerprint string `json:"fingerprint"`
	// WholePartitions is true when no partition is split between shards
	// (the sink keeps each partition's order: SinkDescriptor.WholePartitionShards).
	WholePartitions bool    `json:"whole_partitions,omitempty"`
	Shards          []Shard `json:"shards"`
}

// Shard is one shard of a ShardSet: the sub-ranges one process replays.
type Shard struct {
	Index int `json:"shard"`
	// Group is the shard's own replay group (ShardGroup): its commits are
	// the shard's progress.
	Group string `json:"group"`
	// Records is the number of offsets of the sub-ranges (an upper bound
	// on records, as Range.Records).
	Records int64 `json:"records"`
	// Bytes estimates the keys and values of the sub-ranges from the
	// records sampled at each partition's range ends; 0 when unknown.
	Bytes  int64      `json:"bytes_estimated,omitempty"`
	Ranges []SubRange `json:"ranges"`
}

// SubRange is the part [Start, End) of a partition's range that a shard
// replays.
type SubRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// Records is the number of offsets of the sub-range.
func (r SubRange) Records() int64 { return r.End - r.Start }

// ShardGroup is the replay group of shard index of count of a plan whose
// group is group: "<group>.shard-<index>-of-<count>".
func ShardGroup(group string, index, count int) string {
	return fmt.Sprintf("%s.shard-%d-of-%d", group, index, count)
}

// MaxShards bounds replay plan --shards: more would be more processes
// than partitions of any topic replay was made for, each with its group.
const MaxShards = 1000

// SplitShards splits res's ranges into count shards (1 <= count <=
// MaxShards) and sets res.Shards. Split: the ranges in partition order are
// cut into count runs of consecutive offsets whose sizes differ by one at
// most, a partition's range split between shards where a cut falls inside
// it. whole: no partition is split; each range goes, largest first, to the
// shard with the fewest offsets so far (ties to the lowest index), which
// balances only as far as the partitions allow. bytes estimates each
// partition's bytes (nil: unknown). Empty ranges go to no shard: they
// replay nothing. The result depends on the ranges and count alone.
func SplitShards(res *Resolution, count int, whole bool, bytes map[int32]int64) error {
	if count < 1 || count > MaxShards {
		return fmt.Errorf("--shards %d: the number of shards is 1 to %d", count, MaxShards)
	}
	shards := make([]Shard, count)
	for i := range shards {
		shards[i] = Shard{Index: i, Group: ShardGroup(res.Group, i, count), Ranges: []SubRange{}}
	}
	ranges := slices.Clone(res.Ranges)
	slices.SortFunc(ranges, func(a, b Range) int { return cmp.Compare(a.Partition, b.Partition) })
	if whole {
		splitWhole(shards, ranges)
	} else {
		splitEven(shards, ranges, res.Total())
	}
	for i := range shards {
		s := &shards[i]
		slices.SortFunc(s.Ranges, func(a, b SubRange) int { return cmp.Compare(a.Partition, b.Partition) })
		for _, sr := range s.Ranges {
			s.Records += sr.Records()
			if r, _ := res.rangeOf(sr.Partition); bytes != nil && r.Records() > 0 {
				s.Bytes += bytes[sr.Partition] * sr.Records() / r.Records()
			}
		}
	}
	res.Shards = &ShardSet{Count: count, WholePartitions: whole, Shards: shards}
	res.Shards.Fingerprint = ShardFingerprint(res)
	return nil
}

// splitEven cuts the ranges (total offsets), in order, into len(shards) runs.
func splitEven(shards []Shard, ranges []Range, total int64) {
	n := int64(len(shards))
	// Shard i holds the offsets at positions [bound(i), bound(i+1)) of
	// the ranges laid end to end.
	bound := func(i int) int64 { return int64(i) * total / n }
	i, pos := 0, int64(0)
	for _, r := range ranges {
		for start := r.Start; start < r.End; {
			for bound(i+1) <= pos+start-r.Start {
				i++
			}
			end := min(r.End, r.Start+bound(i+1)-pos)
			shards[i].Ranges = append(shards[i].Ranges, SubRange{Partition: r.Partition, Start: start, End: end})
			start = end
		}
		pos += r.Records()
	}
}

// splitWhole gives each range, largest first, to the shard with the fewest
// offsets so far.
func splitWhole(shards []Shard, ranges []Range) {
	order := slices.Clone(ranges)
	slices.SortStableFunc(order, func(a, b Range) int { return cmp.Compare(b.Records(), a.Records()) })
	load := make([]int64, len(shards))
	for _, r := range order {
		if r.Records() == 0 {
			continue
		}
		i := slices.Index(load, slices.Min(load)) // the first of the fewest
		shards[i].Ranges = append(shards[i].Ranges, SubRange{Partition: r.Partition, Start: r.Start, End: r.End})
		load[i] += r.Records()
	}
}

// ShardFingerprint is the SHA-256 (16 hex digits) of what a shard run
// relies on: the plan's name and fingerprint, the topic and group, every
// range and every shard's sub-ranges and group.
func ShardFingerprint(res *Resolution) string {
	type rng struct{ P, S, E int64 }
	canon := struct {
		Plan, Fingerprint, Topic, Group string
		Ranges                          []rng
		Shards                          [][]rng
		Groups                          []string
		Whole                           bool
	}{Plan: res.Plan, Fingerprint: res.Fingerprint, Topic: res.Topic, Group: res.Group}
	for _, r := range res.Ranges {
		canon.Ranges = append(canon.Ranges, rng{int64(r.Partition), r.Start, r.End})
	}
	if s := res.Shards; s != nil {
		canon.Whole = s.WholePartitions
		for _, sh := range s.Shards {
			var rs []rng
			for _, r := range sh.Ranges {
				rs = append(rs, rng{int64(r.Partition), r.Start, r.End})
			}
			canon.Shards = append(canon.Shards, rs)
			canon.Groups = append(canon.Groups, sh.Group)
		}
	}
	b, _ := json.Marshal(canon)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseShard reads --shard I/N: shard I (0-based) of N.
func ParseShard(s string) (index, count int, err error) {
	a, b, ok := strings.Cut(s, "/")
	index, err = strconv.Atoi(a)
	count, err2 := strconv.Atoi(b)
	if !ok || err != nil || err2 != nil || count < 1 || index < 0 || index >= count {
		return 0, 0, fmt.Errorf("--shard %q: want I/N, shard I (0 to N-1) of N, e.g. 0/4 (a Kubernetes Indexed Job passes $JOB_COMPLETION_INDEX as I)", s)
	}
	return index, count, nil
}

// checkShards checks a resolution file's shards: each sub-range inside its
// partition's range, no offset in two shards, every offset of the ranges
// in one.
func (s *ShardSet) check(ranges []Range) error {
	if s.Count != len(s.Shards) || s.Count < 1 {
		return fmt.Errorf("shards: count %d but %d shards listed", s.Count, len(s.Shards))
	}
	covered := map[int32][]SubRange{}
	for i, sh := range s.Shards {
		if sh.Index != i {
			return fmt.Errorf("shards: shard %d is listed at position %d", sh.Index, i)
		}
		for _, sr := range sh.Ranges {
			covered[sr.Partition] = append(covered[sr.Partition], sr)
		}
	}
	for _, r := range ranges {
		subs := covered[r.Partition]
		delete(covered, r.Partition)
		slices.SortFunc(subs, func(a, b SubRange) int { return cmp.Compare(a.Start, b.Start) })
		at := r.Start
		for _, sr := range subs {
			if sr.Start != at || sr.End < sr.Start || sr.End > r.End {
				return fmt.Errorf("shards: partition %d: the shards' sub-ranges do not cover its range [%d, %d) once each (found [%d, %d) where %d was next)", r.Partition, r.Start, r.End, sr.Start, sr.End, at)
			}
			at = sr.End
		}
		if at != r.End {
			return fmt.Errorf("shards: partition %d: the shards' sub-ranges end at %d, its range at %d", r.Partition, at, r.End)
		}
	}
	for p := range covered {
		return fmt.Errorf("shards: partition %d is in a shard but has no range", p)
	}
	return nil
}

// UsageError is a shard asked for that the file cannot give (no shards,
// another count): a mistake in the command, which trying again does not
// mend (the command line exits 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the error.
func (e *UsageError) Unwrap() error { return e.Err }

// ShardRun is one shard of a sharded resolution, ready to run: the plan
// with the shard's group, throttle share and sink (SinkDescriptor.Shard),
// and the resolution of the shard's sub-ranges alone, as Options.Pinned.
type ShardRun struct {
	Plan       *plan.Plan
	Resolution *Resolution
	Shard      Shard
	// Share is the shard's part of the plan's throttle (its records over
	// all shards' records).
	Share float64
}

// ForShard derives shard index of count from p and res, a resolution file
// of p with shards. It refuses (*fault.SafetyError) a file made for
// another plan or version of it, or whose ranges or shards were edited
// since it was written (the shard fingerprint), and a count that is not
// the file's. The shard's plan differs from p in its group
// (ShardGroup), its throttle (the share of its records) and what its
// sink's descriptor changes for a shard (the file sink's {shard}).
func ForShard(p *plan.Plan, res *Resolution, index, count int, sinks plan.SinkCatalog) (*ShardRun, error) {
	s := res.Shards
	if s == nil {
		return nil, &UsageError{Err: fmt.Errorf("--shard %d/%d: the resolution file has no shards: write one with 'replay plan PLAN --shards %d --out FILE'", index, count, count)}
	}
	if err := checkPinnedPlan(p, res); err != nil {
		return nil, err
	}
	if fp := ShardFingerprint(res); fp != s.Fingerprint {
		return nil, &fault.SafetyError{Group: p.Group, Hint: fault.HintResolveAgain, Reason: fmt.Sprintf("the resolution file's ranges or shards were edited after it was written (shard fingerprint %s, the file says %s)", fp, s.Fingerprint)}
	}
	if count != s.Count {
		return nil, &UsageError{Err: fmt.Errorf("--shard %d/%d: the resolution file has %d shards, not %d: pass --shard I/%d", index, count, s.Count, count, s.Count)}
	}
	// Records are counted from the sub-ranges: the records field is for
	// review and not part of the shard fingerprint.
	sh, total := s.Shards[index], int64(0)
	sh.Records = 0
	for i, x := range s.Shards {
		for _, sub := range x.Ranges {
			total += sub.Records()
			if i == index {
				sh.Records += sub.Records()
			}
		}
	}
	sp := *p
	sp.Group = sh.Group
	share := 1.0
	if total > 0 {
		share = float64(sh.Records) / float64(total)
	}
	sp.Throttle.RecordsPerSecond = p.Throttle.RecordsPerSecond * share
	sp.Throttle.BytesPerSecond = plan.ByteSize(float64(p.Throttle.BytesPerSecond) * share)
	if err := shardSinks(&sp, index, count, sinks); err != nil {
		return nil, err
	}
	sr := *res
	sr.Group, sr.Fingerprint, sr.Shards = sp.Group, sp.Fingerprint(), nil
	// A partition of the window outside the shard gets an empty range at
	// its end: the shard replays nothing of it, yet the run knows it is
	// the window's (not one added to the topic since), and a shard with
	// no offsets at all still runs, publishing its empty output over an
	// earlier run's.
	sr.Ranges = make([]Range, 0, len(res.Ranges))
	for _, r := range res.Ranges {
		r.Outcome, r.Lost, r.Detail = InRange, 0, ""
		i := slices.IndexFunc(sh.Ranges, func(sub SubRange) bool { return sub.Partition == r.Partition })
		if i < 0 {
			r.Start = r.End
		} else {
			r.Start, r.End = sh.Ranges[i].Start, sh.Ranges[i].End
		}
		sr.Ranges = append(sr.Ranges, r)
	}
	return &ShardRun{Plan: &sp, Resolution: &sr, Shard: sh, Share: share}, nil
}

// shardSinks gives sp's sink and dead-letter sink their shard's settings
// (SinkDescriptor.Shard), on copies of their sections; count 0 only checks
// that they need no shard.
func shardSinks(sp *plan.Plan, index, count int, sinks plan.SinkCatalog) error {
	for _, s := range []*plan.Sink{&sp.Sink, sp.DeadLetter} {
		if s == nil {
			continue
		}
		d, ok := sinks.Lookup(s.Type)
		if !ok || d.Shard == nil {
			continue
		}
		cfg, err := d.Shard(s, index, count)
		if err != nil {
			return err
		}
		if count == 0 {
			continue
		}
		if s == sp.DeadLetter {
			dl := *sp.DeadLetter
			dl.Config = cfg
			sp.DeadLetter = &dl
		} else {
			sp.Sink.Config = cfg
		}
	}
	return nil
}

// CheckUnsharded refuses a run without --shard of a plan whose sink needs
// one (SinkDescriptor.Shard with count 0: a file path holding {shard}).
func CheckUnsharded(p *plan.Plan, sinks plan.SinkCatalog) error {
	return shardSinks(p, 0, 0, sinks)
}

// ShardState is where one shard stands in its replay group.
type ShardState string

// Shard states (ShardProgress).
const (
	// ShardNotStarted: the shard's group has no commit of it.
	ShardNotStarted ShardState = "not-started"
	// ShardRunning: a run holds the shard's group now.
	ShardRunning ShardState = "running"
	// ShardStopped: the shard made progress but no run holds it: it
	// failed or was stopped; re-running it resumes.
	ShardStopped ShardState = "stopped"
	// ShardDone: every sub-range reached its end.
	ShardDone ShardState = "done"
	// ShardOtherPlan: the shard's group holds another plan's (or another
	// resolution's) checkpoints, or commits replay did not make.
	ShardOtherPlan ShardState = "other-plan"
)

// ShardProgressOf is one shard's line of ShardStatus.
type ShardProgressOf struct {
	Index       int        `json:"shard"`
	Group       string     `json:"group"`
	State       ShardState `json:"state"`
	Holder      string     `json:"holder,omitempty"`
	Records     int64      `json:"records"`
	Replayed    int64      `json:"replayed"`
	PercentDone float64    `json:"percent_done"`
	// ETA is the time left at the shard's throttle share ("unthrottled"
	// without one).
	ETA    string `json:"eta"`
	Detail string `json:"detail,omitempty"`
}

// ShardStatus is where every shard of a sharded resolution stands, read
// from each shard's replay group; reading it changes nothing.
type ShardStatus struct {
	Plan        string            `json:"plan"`
	Topic       string            `json:"topic"`
	Fingerprint string            `json:"shard_fingerprint"`
	Shards      []ShardProgressOf `json:"shards"`
	Records     int64             `json:"records"`
	Replayed    int64             `json:"replayed"`
	PercentDone float64           `json:"percent_done"`
	// ETA is the time left for the whole backfill at the plan's throttle
	// (the shards run at once, each at its share).
	ETA       string    `json:"eta"`
	CheckedAt time.Time `json:"checked_at"`
}

// Count is the number of shards in state s.
func (st *ShardStatus) Count(s ShardState) int {
	n := 0
	for _, x := range st.Shards {
		if x.State == s {
			n++
		}
	}
	return n
}

// ShardProgress reads where every shard of res, a sharded resolution of
// p, stands: each shard's group's commits against its sub-ranges, and the
// run that holds the group, if any.
func (c *Cluster) ShardProgress(ctx context.Context, p *plan.Plan, res *Resolution, sinks plan.SinkCatalog) (*ShardStatus, error) {
	if res.Shards == nil {
		return nil, fmt.Errorf("the resolution file has no shards (replay plan --shards N --out FILE writes them); 'replay status %s' shows an unsharded run", p.Name)
	}
	st := &ShardStatus{Plan: p.Name, Topic: p.Source.Topic, Fingerprint: res.Shards.Fingerprint, CheckedAt: time.Now().UTC()}
	var left time.Duration
	for i := range res.Shards.Shards {
		run, err := ForShard(p, res, i, res.Shards.Count, sinks)
		if err != nil {
			return nil, err
		}
		pr, err := c.Progress(ctx, run.Plan)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		sp := shardLine(run, pr)
		if d, ok := ETA(run.Plan.Throttle, sp.Records-sp.Replayed, 0); ok {
			sp.ETA, left = d.String(), max(left, d)
		}
		st.Shards = append(st.Shards, sp)
		st.Records += sp.Records
		st.Replayed += sp.Replayed
	}
	st.PercentDone = percent(st.Replayed, st.Records)
	st.ETA = "unthrottled"
	if p.Throttle.RecordsPerSecond > 0 {
		st.ETA = left.String()
	}
	return st, nil
}

// shardLine reads one shard's state from its group's progress: the commits
// of this shard (its fingerprint) on its sub-ranges count.
func shardLine(run *ShardRun, pr *Progress) ShardProgressOf {
	sh := run.Shard
	sp := ShardProgressOf{Index: sh.Index, Group: sh.Group, Records: sh.Records, Holder: pr.Holder, ETA: "unthrottled"}
	done := true
	for _, sub := range sh.Ranges {
		i := slices.IndexFunc(pr.Partitions, func(pp PartitionProgress) bool { return pp.Partition == sub.Partition })
		if i < 0 || !pr.Partitions[i].ThisPlan || pr.Partitions[i].Start != sub.Start || pr.Partitions[i].End != sub.End {
			done = done && sub.Records() == 0
			continue
		}
		pp := pr.Partitions[i]
		sp.Replayed += min(max(pp.Committed, sub.Start), sub.End) - sub.Start
		done = done && pp.Done
	}
	sp.PercentDone = percent(sp.Replayed, sp.Records)
	switch {
	case pr.State == StateForeign || pr.State == StateOtherPlan:
		sp.State, sp.Detail = ShardOtherPlan, fmt.Sprintf("group %s holds checkpoints of another plan or resolution (%s %s)", sh.Group, pr.OtherPlan, pr.OtherFingerprint)
	case pr.Holder != "" && pr.HolderGone:
		sp.State, sp.Detail, sp.Holder = ShardStopped, "its run was killed ("+pr.Holder+", process gone)", ""
	case pr.Holder != "":
		sp.State = ShardRunning
	case done && pr.State != StateNotStarted || sh.Records == 0:
		sp.State = ShardDone
	case pr.State == StateNotStarted:
		sp.State = ShardNotStarted
	default:
		sp.State, sp.Detail = ShardStopped, "progress, but no run holds it: it failed or was stopped"
	}
	return sp
}
