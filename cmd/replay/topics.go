package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks/registry"
)

// topicPlans returns the plan of each topic of p (plan.ForTopic), in the
// plan's order; a plan of one topic is its own.
func topicPlans(p *plan.Plan) ([]*plan.Plan, error) {
	var out []*plan.Plan
	for _, t := range p.Topics() {
		tp, err := p.ForTopic(t)
		if err != nil {
			return nil, err
		}
		out = append(out, tp)
	}
	return out, nil
}

// prepareTopics prepares a job for each topic of p, with opts (its pinned
// resolution, the topic's of the --resolution file). A job whose window
// retention cut is returned with the error (its table shows where).
func prepareTopics(ctx context.Context, c *runner.Cluster, p *plan.Plan, opts runner.Options) ([]*runner.Job, error) {
	// One instant (--at, else now) for every topic: a relative window is
	// one window, not one per moment each topic is resolved.
	if opts.At.IsZero() {
		opts.At = time.Now()
	}
	plans, err := topicPlans(p)
	if err != nil {
		return nil, err
	}
	if opts.Pinned != nil && len(opts.Pinned.Topics) == 0 {
		return nil, usageError{fmt.Errorf("--resolution: the file is of topic %s, and plan %s reads topics %s: write it again with 'replay plan PLAN --out FILE'", opts.Pinned.Topic, p.Name, strings.Join(p.Source.Topics, ", "))}
	}
	var jobs []*runner.Job
	for _, tp := range plans {
		o := opts
		if opts.Pinned != nil {
			if o.Pinned, err = opts.Pinned.OfTopic(tp.Source.Topic); err != nil {
				return jobs, usageError{fmt.Errorf("--resolution: %w: write it again with 'replay plan PLAN --out FILE'", err)}
			}
		}
		job, err := runner.Prepare(ctx, c, tp, o)
		if job != nil {
			jobs = append(jobs, job)
		}
		if err != nil {
			return jobs, fmt.Errorf("topic %s: %w", tp.Source.Topic, err)
		}
	}
	return jobs, nil
}

// runTopics runs a plan of several topics: the group is held once, each
// topic's job is prepared and shown, the whole is confirmed once, then the
// topics are replayed in the plan's order, each into its own sink at the
// shared throttle. A failure stops the run at its topic; a re-run resumes.
func (a *app) runTopics(ctx context.Context, c *runner.Cluster, p *plan.Plan, file string, o runOptions, opts runner.Options, metrics *metricsServer) (*runner.Report, error) {
	switch {
	case o.join:
		return nil, usageError{fmt.Errorf("--join: plan %s reads several topics, which one process replays one after the other: run it without --join, or write one plan per topic", p.Name)}
	case o.shard != "":
		return nil, usageError{fmt.Errorf("--shard: plan %s reads several topics: shards split the ranges of one topic; write one plan per topic to shard them", p.Name)}
	case o.resumeFromSink && !keepsCheckpoints(p):
		return nil, usageError{fmt.Errorf("--resume-from-sink: the %s sink of %s keeps no checkpoints of its own: only %s does (and not with on_error: dead_letter); use --restart to start over", p.Sink.Type, file, registry.Catalog().CheckpointKeepers())}
	}
	opts.Log = a.log
	first, err := p.ForTopic(p.Source.Topics[0])
	if err != nil {
		return nil, err
	}
	if d := registry.Describe(p.Sink); d.FencesOthers == nil || !d.FencesOthers(&first.Sink) {
		// One hold for the group keeps every other run of the plan out,
		// whichever topic it would start with.
		hold, err := a.holdGroup(ctx, c, first, false)
		if err != nil {
			return nil, err
		}
		defer hold.Release()
		opts.Hold = hold
	}
	out := a.resultsOut(p.Sink)
	jobs, err := prepareTopics(ctx, c, p, opts)
	if cut := (*runner.CutError)(nil); errors.As(err, &cut) {
		for _, job := range jobs {
			printResolution(out, job) // where retention cut the window
		}
	}
	if err != nil {
		return nil, err
	}
	if err := a.showJobs(ctx, out, o, jobs...); err != nil {
		return nil, err
	}
	// Every topic's ranges go into the group first: a run stopped in one
	// topic resumes them all as resolved now.
	for _, job := range jobs {
		if err := job.PinRanges(ctx); err != nil {
			return nil, fmt.Errorf("topic %s: %w", job.Resolution.Topic, err)
		}
	}
	metrics.serve(a, jobs...)
	return a.replayTopicJobs(ctx, p, jobs, file, o, out)
}

// replayTopicJobs replays the jobs of a plan of several topics one after
// the other, and reports them as one run: a failed topic ends the run, and
// its report lists the topics it did not reach.
func (a *app) replayTopicJobs(ctx context.Context, p *plan.Plan, jobs []*runner.Job, file string, o runOptions, out io.Writer) (*runner.Report, error) {
	var reps []*runner.Report
	nothing := 0
	for i, job := range jobs {
		rep, none, err := a.replayJob(ctx, job, file, o, func() {})
		if rep != nil {
			rep.PlanFile = file
			reps = append(reps, rep)
		}
		if err != nil {
			// The report lists the topics the run did not reach too.
			if rep == nil {
				reps = append(reps, job.Pending())
			}
			for _, later := range jobs[i+1:] {
				reps = append(reps, later.Pending())
			}
			all := runner.JoinReports(p, reps)
			all.Error, all.NothingToDo, all.Published = err.Error(), false, false
			return all, a.finishTopics(o, all, withResumeHint(fmt.Errorf("topic %s: %w", job.Resolution.Topic, err), file, o))
		}
		if none {
			nothing++
			fmt.Fprintf(out, "topic %s: nothing to do: already replayed to its end\n", job.Resolution.Topic)
		}
	}
	all := runner.JoinReports(p, reps)
	if nothing == len(jobs) {
		a.sayNothingToDo(out, p, fmt.Sprintf("nothing to do: plan %s already replayed every partition of %s to its end (group %s); run 'replay reset' or use --restart to replay again", p.Name, strings.Join(p.Source.Topics, ", "), p.Group))
		return nil, a.writeReport(o.report, all, nil)
	}
	read, written, skipped := all.Totals()
	fmt.Fprintf(out, "plan %s: %d topics, %d records read, %d written, %d skipped\n", p.Name, len(jobs), read, written, skipped)
	return all, a.finishTopics(o, all, nil)
}

// finishTopics writes the report of a run of several topics and returns
// err with the report's own failure.
func (a *app) finishTopics(o runOptions, rep *runner.Report, err error) error {
	if werr := a.writeReport(o.report, rep, err); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// statusTopics shows the progress of a plan of several topics: each
// topic's table and state, then the whole plan's; with --output json, the
// joined progress (runner.JoinProgress).
func (a *app) statusTopics(ctx context.Context, c *runner.Cluster, p *plan.Plan, file, output string) error {
	plans, err := topicPlans(p)
	if err != nil {
		return err
	}
	var prs []*runner.Progress
	for _, tp := range plans {
		pr, err := c.Progress(ctx, tp)
		if err != nil {
			return fmt.Errorf("topic %s: %w", tp.Source.Topic, err)
		}
		if pr.State == runner.StateNotStarted {
			if pr.Record, err = runner.ReadRunRecord(stateDir(), c, tp); err != nil {
				return err
			}
		}
		prs = append(prs, pr)
	}
	all := runner.JoinProgress(p, prs)
	if output == "json" {
		return writeJSON(a.stdout, all)
	}
	for _, pr := range prs {
		printProgress(a.stdout, pr, file)
		fmt.Fprintln(a.stdout)
	}
	fmt.Fprintf(a.stdout, "plan %s, topics %s: %s", p.Name, strings.Join(p.Source.Topics, ", "), all.State)
	if all.Records > 0 {
		fmt.Fprintf(a.stdout, ", %d of %d offsets replayed (%.1f%%)", all.Replayed, all.Records, all.PercentDone)
	}
	if all.State == runner.StateInProgress {
		fmt.Fprintf(a.stdout, ", eta %s at the plan's throttle", all.ETA)
	}
	fmt.Fprintln(a.stdout)
	return nil
}

// planTopicsView is what `replay plan` shows of a plan of several topics:
// each topic's view (its partition table, totals and sink notes), then
// the plan's totals over all of them.
type planTopicsView struct {
	Plan        string       `json:"plan"`
	Fingerprint string       `json:"fingerprint"`
	Group       string       `json:"group"`
	Topics      []planView   `json:"topics"`
	Total       planTotal    `json:"total"`
	Throttle    throttleView `json:"throttle"`
	ETASeconds  *int64       `json:"eta_seconds"` // null when unthrottled
	ETA         string       `json:"eta"`         // a duration, or "unthrottled"
	NothingToDo bool         `json:"nothing_to_do"`
}

// planTopics is `replay plan` for a plan of several topics: every topic's
// window resolved (or run resumed), its table, then the plan's totals;
// --out writes one resolution of all the topics.
func (a *app) planTopics(ctx context.Context, file string, o planOptions) error {
	if o.shardsSet {
		return usageError{fmt.Errorf("--shards: %s reads several topics: shards split the ranges of one topic; write one plan per topic to shard them", file)}
	}
	p, c, opts, err := a.connectPinned(ctx, file, o.resolution)
	if err != nil {
		return err
	}
	defer c.Close()
	jobs, prepErr := prepareTopics(ctx, c, p, opts)
	if cut := (*runner.CutError)(nil); prepErr != nil && !errors.As(prepErr, &cut) {
		return prepErr
	}
	all := planTopicsView{Plan: p.Name, Fingerprint: p.Fingerprint(), Group: p.Group, NothingToDo: true,
		Throttle: throttleView{RecordsPerSecond: p.Throttle.RecordsPerSecond, BytesPerSecond: int64(p.Throttle.BytesPerSecond)}}
	var resolutions []*runner.Resolution
	for _, job := range jobs {
		samples, err := job.Sample(ctx)
		if err != nil {
			return errors.Join(prepErr, fmt.Errorf("topic %s: read the ends of the ranges: %w", job.Resolution.Topic, err))
		}
		v := newPlanView(job, samples, o.resolution)
		a.describeSchemas(ctx, job, &v)
		v.Refused = prepErr != nil
		all.Topics = append(all.Topics, v)
		all.Total.Records += v.Total.Records
		all.Total.Remaining += v.Total.Remaining
		all.Total.Bytes += v.Total.Bytes
		all.NothingToDo = all.NothingToDo && v.NothingToDo
		resolutions = append(resolutions, job.Resolution)
	}
	all.ETA = "unthrottled"
	if d, ok := runner.ETA(p.Throttle, all.Total.Remaining, all.Total.Bytes); ok {
		secs := int64(d.Seconds())
		all.ETASeconds, all.ETA = &secs, d.String()
	}
	if o.out != "" && prepErr == nil {
		b, err := runner.MarshalResolution(runner.JoinResolutions(p, resolutions))
		if err == nil {
			err = os.WriteFile(o.out, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("write the resolution: %w", err)
		}
	}
	if o.output == "json" {
		if err := writeJSON(a.stdout, all); err != nil {
			return err
		}
	} else {
		for _, v := range all.Topics {
			printPlan(a.stdout, v)
			fmt.Fprintln(a.stdout)
		}
		eta := all.ETA + " at the plan's throttle"
		if all.ETASeconds == nil {
			eta = "unthrottled"
		}
		fmt.Fprintf(a.stdout, "plan %s, topics %s: %d offsets, %d to replay (%s); eta %s\n", p.Name, strings.Join(p.Source.Topics, ", "),
			all.Total.Records, all.Total.Remaining, estimate(all.Total.Bytes, false), eta)
		if o.out != "" && prepErr == nil {
			fmt.Fprintf(a.stdout, "resolution saved to %s: review it, then run 'replay run %s --resolution %s'\n", o.out, file, o.out)
		}
	}
	if prepErr != nil {
		return prepErr
	}
	a.setExit(exitInvalid, a.detailedExit && !all.NothingToDo) // --detailed-exitcode: 2 = work to do
	return nil
}
