package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks/registry"
)

// Shards: replay plan --shards N splits the resolution for several
// processes, replay run --shard I/N runs one of them, replay status
// --resolution FILE shows them all.

// shardRun turns a run of p into the run of shard o.shard of the sharded
// resolution in opts.Pinned: it returns the shard's plan (group, throttle
// share, sink) and makes opts.Pinned the shard's sub-ranges. Without
// --shard it refuses a sharded resolution and a sink that needs a shard.
func (a *app) shardRun(p *plan.Plan, opts *runner.Options, o runOptions) (*plan.Plan, error) {
	if o.shard == "" {
		if opts.Pinned != nil && opts.Pinned.Shards != nil {
			n := opts.Pinned.Shards.Count
			return nil, usageError{fmt.Errorf("--resolution %s is split into %d shards: run each with --shard I/%d (I from 0 to %d), or write an unsplit resolution with 'replay plan --out'", o.resolution, n, n, n-1)}
		}
		if err := runner.CheckUnsharded(p, registry.Catalog()); err != nil {
			return nil, usageError{err}
		}
		return p, nil
	}
	index, count, err := runner.ParseShard(o.shard)
	switch {
	case err != nil:
		return nil, usageError{err}
	case o.resolution == "":
		return nil, usageError{fmt.Errorf("--shard %s needs the sharded resolution it is a shard of: --resolution FILE, written by 'replay plan %s --shards %d --out FILE'", o.shard, p.Name, count)}
	case o.join:
		return nil, usageError{errors.New("--shard and --join: a shard is held by one process; spread the shards over processes instead (one --shard I/N each)")}
	}
	run, err := runner.ForShard(p, opts.Pinned, index, count, registry.Catalog())
	if ue := (*runner.UsageError)(nil); errors.As(err, &ue) {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, err
	}
	a.log.Info().Int("shard", index).Int("shards", count).Str("group", run.Plan.Group).Int64("records", run.Shard.Records).
		Float64("throttle_share", run.Share).Msg("running one shard of the resolution")
	opts.Pinned = run.Resolution
	return run.Plan, nil
}

// shardPlan splits job's resolution into shards for replay plan --shards
// (or --max-records-per-shard) and returns their view, or that of a
// sharded --resolution file; nil for neither.
func shardPlan(job *runner.Job, v planView, o planOptions) (*shardsView, error) {
	p, res := job.Plan, job.Resolution
	d := registry.Describe(p.Sink)
	whole := d.WholePartitionShards != nil && d.WholePartitionShards(&p.Sink)
	if o.shardsSet && o.shards <= 0 && o.maxPerShard <= 0 {
		return nil, usageError{fmt.Errorf("--shards %d --max-records-per-shard %d: give the number of shards (1 to %d) or the most records a shard may hold (at least 1)", o.shards, o.maxPerShard, runner.MaxShards)}
	}
	if o.shards == 0 && o.maxPerShard == 0 {
		if res.Shards != nil { // replay plan --resolution of a sharded file
			return newShardsView(res, p.Throttle, whole), nil
		}
		return nil, nil
	}
	switch {
	case o.shards != 0 && o.maxPerShard != 0:
		return nil, usageError{errors.New("--shards and --max-records-per-shard: give one (the number of shards, or the most records a shard may hold)")}
	case o.out == "":
		return nil, usageError{errors.New("--shards: the shards are for 'replay run --resolution FILE --shard I/N': write them with --out FILE")}
	case !job.Fresh:
		return nil, &fault.SafetyError{Group: p.Group, Reason: fmt.Sprintf("--shards splits a fresh resolution, and the group holds checkpoints of a run of plan %s: shards of its half-replayed ranges would replay again what it did; finish that run with 'replay run', or discard it with 'replay reset' first", p.Name)}
	case o.maxPerShard < 0:
		return nil, usageError{fmt.Errorf("--max-records-per-shard %d: give a positive number of records", o.maxPerShard)}
	}
	count := o.shards
	if o.maxPerShard > 0 {
		count = int(min((res.Total()+o.maxPerShard-1)/o.maxPerShard, runner.MaxShards))
		count = max(count, 1)
	}
	bytes := map[int32]int64{}
	for _, pp := range v.Partitions {
		bytes[pp.Partition] = pp.Bytes
	}
	if err := runner.SplitShards(res, count, whole, bytes); err != nil {
		return nil, usageError{err}
	}
	// Every shard's sink must be able to run: a file path without {shard}
	// is refused here rather than at the first shard's run.
	if _, err := runner.ForShard(p, res, 0, count, registry.Catalog()); err != nil {
		res.Shards = nil
		return nil, usageError{err}
	}
	sv := newShardsView(res, p.Throttle, whole)
	if o.maxPerShard > 0 {
		for _, sh := range res.Shards.Shards {
			if sh.Records > o.maxPerShard {
				sv.Note = fmt.Sprintf("--max-records-per-shard %d cannot be met: shard %d holds %d records (at most %d shards; with whole partitions a partition is not split)", o.maxPerShard, sh.Index, sh.Records, runner.MaxShards)
				break
			}
		}
	}
	return sv, nil
}

// shardsView is the shard table of replay plan --shards.
type shardsView struct {
	Count           int         `json:"count"`
	Fingerprint     string      `json:"fingerprint"`
	WholePartitions bool        `json:"whole_partitions"`
	Shards          []shardView `json:"shards"`
	// Note says when --max-records-per-shard could not be met.
	Note string `json:"note,omitempty"`
}

type shardView struct {
	runner.Shard
	// ETASeconds is the time the shard takes at its share of the plan's
	// throttle; null when unthrottled.
	ETASeconds *int64 `json:"eta_seconds"`
	ETA        string `json:"eta"`
}

func newShardsView(res *runner.Resolution, t plan.Throttle, whole bool) *shardsView {
	s := res.Shards
	v := &shardsView{Count: s.Count, Fingerprint: s.Fingerprint, WholePartitions: whole}
	var total int64
	for _, sh := range s.Shards {
		total += sh.Records
	}
	for _, sh := range s.Shards {
		sv := shardView{Shard: sh, ETA: "unthrottled"}
		share := t
		if total > 0 {
			f := float64(sh.Records) / float64(total)
			share.RecordsPerSecond *= f
			share.BytesPerSecond = plan.ByteSize(float64(share.BytesPerSecond) * f)
		}
		if eta, ok := runner.ETA(share, sh.Records, sh.Bytes); ok && sh.Records > 0 {
			secs := int64(eta / time.Second)
			sv.ETASeconds, sv.ETA = &secs, eta.String()
		}
		v.Shards = append(v.Shards, sv)
	}
	return v
}

// maxListedSubRanges is how many of a shard's sub-ranges the plan table
// lists in full.
const maxListedSubRanges = 8

// printShards renders the shard table: shard, group, sub-ranges (the first
// four, a count and the last, past maxListedSubRanges), records, bytes and
// ETA.
func printShards(w io.Writer, v *shardsView) {
	how := "partitions split where a cut falls inside them"
	if v.WholePartitions {
		how = "whole partitions (the sink keeps each partition's order)"
	}
	fmt.Fprintf(w, "\n%d shards (shard fingerprint %s; %s):\n", v.Count, v.Fingerprint, how)
	tw := table(w)
	fmt.Fprintln(tw, "SHARD\tGROUP\tPARTITION SUB-RANGES\tRECORDS\tBYTES (EST.)\tETA")
	for _, s := range v.Shards {
		var subs []string
		for _, r := range s.Ranges {
			subs = append(subs, fmt.Sprintf("%d:[%d,%d)", r.Partition, r.Start, r.End))
		}
		switch n := len(subs); {
		case n == 0:
			subs = []string{"-"}
		case n > maxListedSubRanges: // a topic of hundreds of partitions: the file and -o json list them all
			subs = append(subs[:maxListedSubRanges/2:maxListedSubRanges/2], fmt.Sprintf("... (%d sub-ranges)", n), subs[n-1])
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", s.Index, s.Group, strings.Join(subs, " "), s.Records, estimate(s.Bytes, false), s.ETA)
	}
	_ = tw.Flush()
	if v.Note != "" {
		fmt.Fprintln(w, "note: "+v.Note)
	}
}

// shardStatus prints (or writes as JSON) where every shard of the sharded
// resolution file stands: done, running (and who holds it), stopped or
// failed (progress but no holder), not started; then the total.
func (a *app) shardStatus(ctx context.Context, c *runner.Cluster, p *plan.Plan, file, resolution, output string) error {
	res, err := runner.ReadResolution(resolution)
	if err != nil {
		return usageError{fmt.Errorf("--resolution: %w", err)}
	}
	st, err := c.ShardProgress(ctx, p, res, registry.Catalog())
	if err != nil {
		return err
	}
	if output == "json" {
		return writeJSON(a.stdout, st)
	}
	fmt.Fprintf(a.stdout, "plan %s  topic %s  %d shards of %s\n", p.Name, p.Source.Topic, len(st.Shards), resolution)
	tw := table(a.stdout)
	fmt.Fprintln(tw, "SHARD\tGROUP\tSTATE\tREPLAYED\tRECORDS\tDONE\tHOLDER\tETA")
	for _, s := range st.Shards {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%.1f%%\t%s\t%s\n", s.Index, s.Group, s.State, s.Replayed, s.Records, s.PercentDone, cmp.Or(s.Holder, "-"), s.ETA)
	}
	_ = tw.Flush()
	fmt.Fprintf(a.stdout, "total: %d of %d offsets replayed (%.1f%%); %d done, %d running, %d stopped, %d not started; ETA %s\n",
		st.Replayed, st.Records, st.PercentDone, st.Count(runner.ShardDone), st.Count(runner.ShardRunning), st.Count(runner.ShardStopped), st.Count(runner.ShardNotStarted), st.ETA)
	for _, s := range st.Shards {
		if s.State == runner.ShardStopped || s.State == runner.ShardOtherPlan {
			fmt.Fprintf(a.stdout, "shard %d: %s; resume it with 'replay run %s --resolution %s --shard %d/%d'\n", s.Index, s.Detail, file, resolution, s.Index, len(st.Shards))
		}
	}
	return nil
}

// holdGroup holds p's group (runner.HoldGroup). A shard (shard set) held by
// another run waits up to the time a dead run keeps its hold
// (group.JoinSessionTimeout) and a moment: a shard's pod restarted at once
// elsewhere then runs instead of being refused for good (exit 3 is final).
func (a *app) holdGroup(ctx context.Context, c *runner.Cluster, p *plan.Plan, shard bool) (*group.Hold, error) {
	deadline := time.Now().Add(group.JoinSessionTimeout + 3*time.Second)
	for {
		hold, err := runner.HoldGroup(ctx, c, p)
		if err == nil || !shard || !errors.Is(err, group.ErrHeld) || time.Now().After(deadline) {
			return hold, err
		}
		a.log.Warn().Err(err).Msg("the shard is held by another run: waiting for it to let go (a run that died does within the group's session timeout)")
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}
