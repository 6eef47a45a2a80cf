package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
)

// scheduleReport is the --report of one invocation of a plan with a
// schedule: each interval it ran, with its run report, and where the
// schedule stands afterwards.
type scheduleReport struct {
	PlanFile  string           `json:"plan_file"`
	Plan      string           `json:"plan"`
	Group     string           `json:"group"`
	At        time.Time        `json:"at"`
	Intervals []intervalReport `json:"intervals"`
	// Rerun is true for --interval: the schedule's progress did not move.
	Rerun   bool      `json:"rerun,omitempty"`
	Next    time.Time `json:"next_interval,omitzero"`
	NextDue time.Time `json:"next_due,omitzero"`
	Error   string    `json:"error,omitempty"`
	// ExitCode is the code the process exits with (writeReport sets it).
	ExitCode int `json:"exit_code"`
}

type intervalReport struct {
	Start   time.Time      `json:"start"`
	End     time.Time      `json:"end"`
	Read    int64          `json:"read"`
	Written int64          `json:"written"`
	Skipped int64          `json:"skipped"`
	Report  *runner.Report `json:"report"`
}

// runSchedule runs the due intervals of a plan with a schedule window,
// oldest first, each as a resumable run of its own, or re-runs the one
// interval --interval names.
func (a *app) runSchedule(ctx context.Context, c *runner.Cluster, p *plan.Plan, file string, o runOptions, opts runner.Options, metrics *metricsServer) (*runner.Report, error) {
	if o.join || o.resolution != "" {
		return nil, usageError{errors.New("--join and --resolution do not apply to a plan with a schedule window: each interval's ranges are fixed in the replay group when it starts")}
	}
	if o.maxIntervals < 0 {
		return nil, usageError{fmt.Errorf("--max-intervals %d: want 0 (every due interval) or more", o.maxIntervals)}
	}
	if o.interval != "" && o.maxIntervals != 0 {
		return nil, usageError{errors.New("--interval re-runs one interval and --max-intervals bounds a catch-up: drop one of them")}
	}
	opts.Log, opts.At = a.log, a.now()
	srep := &scheduleReport{PlanFile: file, Plan: p.Name, Group: p.Group, At: opts.At.UTC(), Intervals: []intervalReport{}}
	err := a.scheduleLoop(ctx, c, p, file, o, opts, srep, metrics)
	if err != nil {
		srep.Error = err.Error()
	}
	var last *runner.Report // the report of the last interval run
	if n := len(srep.Intervals); n > 0 {
		last = srep.Intervals[n-1].Report
	}
	if werr := a.writeReport(o.report, srep, err); werr != nil {
		err = errors.Join(err, werr)
	}
	if errors.Is(err, runner.ErrInterrupted) {
		// The same invocation: the same logical now, interval and bounds.
		cmd := resumeCommand(file, o)
		if !a.at.IsZero() {
			cmd += " --at " + a.at.UTC().Format(time.RFC3339Nano)
		}
		if o.interval != "" {
			cmd += " --interval " + o.interval
		}
		if o.maxIntervals != 0 {
			cmd += fmt.Sprintf(" --max-intervals %d", o.maxIntervals)
		}
		if o.report != "" {
			cmd += " --report " + o.report
		}
		return last, fmt.Errorf("%w\nresume with: %s", err, cmd)
	}
	if err == nil {
		fmt.Fprintln(a.resultsOut(p.Sink), scheduleSummary(p, srep))
	}
	return last, err
}

func (a *app) scheduleLoop(ctx context.Context, c *runner.Cluster, p *plan.Plan, file string, o runOptions, opts runner.Options, srep *scheduleReport, metrics *metricsServer) error {
	jobOpts := o
	jobOpts.report, jobOpts.ofSchedule = "", true // one report and resume hint per invocation, runSchedule's
	if o.interval != "" {
		at, err := time.Parse(time.RFC3339Nano, o.interval)
		if err != nil {
			return usageError{fmt.Errorf("--interval: want an RFC 3339 time with a zone, e.g. 2026-11-30T03:00:00Z, got %q", o.interval)}
		}
		job, err := runner.PrepareInterval(ctx, c, p, at, opts)
		if err != nil {
			return err
		}
		srep.Rerun = true
		return a.runInterval(ctx, job, file, jobOpts, metrics, srep, "re-running")
	}
	// The run holds the schedule's group while it runs: a second
	// invocation (another cron host, a retried task) is refused naming it.
	hold, err := runner.HoldGroup(ctx, c, p)
	if err != nil {
		return err
	}
	defer hold.Release()
	opts.Hold = hold
	var ran *plan.Interval
	for n := 0; o.maxIntervals == 0 || n < o.maxIntervals; n++ {
		job, st, err := runner.PrepareScheduled(ctx, c, p, opts)
		if err != nil {
			return err
		}
		srep.Next, srep.NextDue = st.Next.Start, st.NextDue
		if job == nil {
			return nil
		}
		if ran != nil && ran.Start.Equal(job.Interval.Start) { // never one interval twice in a loop
			return fmt.Errorf("interval %s is still due after it ran: the group's commits do not record it done; see replay status %s", ran, file)
		}
		ran = job.Interval
		if n == 0 && !o.yes {
			if err := a.confirmRun(ctx, o.in, job); err != nil {
				return err
			}
		}
		what := fmt.Sprintf("interval %d of %d due", n+1, n+st.Due)
		if err := a.runInterval(ctx, job, file, jobOpts, metrics, srep, what); err != nil {
			return err
		}
	}
	st, err := c.Schedule(ctx, p, opts.At)
	if err == nil {
		srep.Next, srep.NextDue = st.Next.Start, st.NextDue
	}
	return err
}

// runInterval runs one interval's job and adds it to the report.
func (a *app) runInterval(ctx context.Context, job *runner.Job, file string, o runOptions, metrics *metricsServer, srep *scheduleReport, what string) error {
	iv, out := *job.Interval, a.resultsOut(job.Plan.Sink)
	fmt.Fprintf(out, "%s %s (%s)\n", what, iv, iv.Start.In(job.Plan.Window.Location()).Format(time.RFC3339))
	printResolution(out, job)
	a.log.Info().Str("plan", job.Plan.Name).Time("interval", iv.Start).Msg("interval started")
	rep, err := a.runJob(ctx, job, file, o, metrics)
	if rep != nil {
		ir := intervalReport{Start: iv.Start, End: iv.End, Report: rep}
		ir.Read, ir.Written, ir.Skipped = rep.Totals()
		srep.Intervals = append(srep.Intervals, ir)
	}
	return err
}

// scheduleSummary is the last line of a schedule run: how many intervals
// ran and when the next one is due.
func scheduleSummary(p *plan.Plan, r *scheduleReport) string {
	loc := p.Window.Location()
	if r.Rerun {
		iv := r.Intervals
		if len(iv) == 0 {
			return "re-ran no interval"
		}
		return fmt.Sprintf("re-ran interval [%s, %s) in group %s; the schedule's progress is unchanged",
			iv[0].Start.Format(time.RFC3339), iv[0].End.Format(time.RFC3339), runner.IntervalGroup(p.Group, plan.Interval{Start: iv[0].Start}))
	}
	next := fmt.Sprintf("next interval [%s, ...) due at %s", r.Next.In(loc).Format(time.RFC3339), r.NextDue.In(loc).Format(time.RFC3339))
	if !r.NextDue.After(r.At) {
		next = fmt.Sprintf("next interval [%s, ...) is already due (--max-intervals stopped the catch-up): run again", r.Next.In(loc).Format(time.RFC3339))
	}
	switch len(r.Intervals) {
	case 0:
		return "nothing due: " + next
	case 1:
		return "ran 1 interval; " + next
	}
	return fmt.Sprintf("ran %d intervals; %s", len(r.Intervals), next)
}

// planSchedule is replay plan for a scheduled plan: the intervals, as
// status lists them. With --detailed-exitcode it exits 2 when an interval
// is due or unfinished.
func (a *app) planSchedule(ctx context.Context, file string, o planOptions) error {
	if o.out != "" || o.resolution != "" || o.shardsSet {
		return usageError{fmt.Errorf("--out, --resolution and --shards pin or split one window's ranges; plan %s is a schedule, whose intervals are resolved one by one as they are run: drop the flag (replay plan lists the intervals)", file)}
	}
	p, c, err := a.loadAndConnect(ctx, file)
	if err != nil {
		return err
	}
	defer c.Close()
	work, err := a.printSchedule(ctx, c, p, o.output)
	if err != nil {
		return err
	}
	a.setExit(exitInvalid, a.detailedExit && work) // --detailed-exitcode: 2 = work to do
	return nil
}

// printSchedule prints where a schedule stands (the intervals done, the
// latest with the ranges its commits record, the one running, the due ones
// and the next one not yet due) and reports whether one is due or
// unfinished (work for replay run).
func (a *app) printSchedule(ctx context.Context, c *runner.Cluster, p *plan.Plan, output string) (bool, error) {
	now := a.now()
	st, err := c.Schedule(ctx, p, now)
	if err != nil {
		return false, err
	}
	work := st.Due > 0 || st.Running != nil
	if output == "json" {
		return work, writeJSON(a.stdout, st)
	}
	w, loc := p.Window, p.Window.Location()
	fmt.Fprintf(a.stdout, "plan %s (fingerprint %s)  topic %s  group %s  schedule every %s in %s from %s, delay %s\n", p.Name, p.Fingerprint(),
		p.Source.Topic, p.Group, w.Every, loc, w.FirstInterval().Start.In(loc).Format(time.RFC3339), time.Duration(w.Delay))
	t := table(a.stdout)
	fmt.Fprintln(t, "INTERVAL\tSTATE\tRANGES (partition:start-end@committed)")
	ranges := func() string {
		var parts []string
		for _, r := range st.Ranges {
			parts = append(parts, fmt.Sprintf("%d:%d-%d@%d", r.Partition, r.Start, r.End, st.Committed[r.Partition]))
		}
		return strings.Join(parts, " ")
	}
	if st.Last != nil {
		earlier := 0
		for iv := w.FirstInterval(); iv.Start.Before(st.Last.Start); iv = w.NextInterval(iv) {
			earlier++
		}
		if earlier > 0 {
			fmt.Fprintf(t, "%d earlier\tdone\t(the commits keep the latest interval's ranges)\n", earlier)
		}
		fmt.Fprintf(t, "%s\tdone\t%s\n", *st.Last, ranges())
	}
	iv := st.Next
	if st.Running != nil {
		fmt.Fprintf(t, "%s\trunning (or interrupted)\t%s\n", *st.Running, ranges())
		iv = w.NextInterval(iv)
	}
	shown := 0
	for ; w.Due(iv, now) && shown < 5; iv = w.NextInterval(iv) {
		fmt.Fprintf(t, "%s\tdue since %s\t-\n", iv, w.DueAt(iv).In(loc).Format(time.RFC3339))
		shown++
	}
	more := st.Due - shown
	if st.Running != nil {
		more--
	}
	if more > 0 {
		fmt.Fprintf(t, "... %d more\tdue\t-\n", more)
		iv, _ = w.IntervalAt(now.Add(-time.Duration(w.Delay))) // the first not yet due
	}
	fmt.Fprintf(t, "%s\tnot yet due (due at %s)\t-\n", iv, w.DueAt(iv).In(loc).Format(time.RFC3339))
	t.Flush()
	return work, nil
}
