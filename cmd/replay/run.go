package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks"
)

// prepare loads the plan, connects and decides what a run would do; it
// changes nothing.
func (a *app) prepare(ctx context.Context, file string, opts runner.Options) (*runner.Job, *runner.Cluster, error) {
	p, err := loadPlanFile(file)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range p.Warnings() {
		a.log.Warn().Str("plan", p.Name).Msg(w.String())
	}
	c, err := runner.Connect(ctx, p.Source)
	if err != nil {
		return nil, nil, err
	}
	opts.Log = a.log
	job, err := runner.Prepare(ctx, c, p, opts)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return job, c, nil
}

// loadPlanFile loads a plan file. A file that cannot be read is a usage mistake
// (exit 2, like an invalid plan and like validate), not a failed run (1).
func loadPlanFile(file string) (*plan.Plan, error) {
	p, err := plan.Load(file, plan.LoadOptions{})
	var invalid *plan.InvalidError
	if err != nil && !errors.As(err, &invalid) {
		return nil, usageError{err}
	}
	return p, err
}

func (a *app) planCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plan PLAN",
		Short: "Show the per-partition offset ranges a run would read (read-only)",
		Long:  "plan resolves the window against the cluster and prints, per partition, the start and end offsets, the record count and the outcome.\nNothing is committed and no sink is touched.",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			job, c, err := a.prepare(cmd.Context(), files[0], runner.Options{})
			if err != nil {
				return err
			}
			defer c.Close()
			printResolution(a.stdout, job)
			if job.NothingToDo() {
				fmt.Fprintln(a.stdout, "nothing to do")
			}
			return nil
		},
	}
}

type runOptions struct {
	restart bool
	report  string
}

func (a *app) runCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run PLAN",
		Short: "Replay the plan's window into its sink, resumably",
		Long: "run resolves the window (or resumes the run recorded in the replay group), reads exactly those offsets,\n" +
			"writes them to the sink and commits progress to the replay group after every durable batch.\n" +
			"SIGINT/SIGTERM finish the in-flight batch, commit and stop; re-run the same command to resume.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			_, err := a.run(cmd.Context(), files[0], o)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.restart, "restart", false, "discard checkpoints of a previous, different version of this plan in the group and start over")
	cmd.Flags().StringVar(&o.report, "report", "", "write the run report as JSON to this file")
	return cmd
}

// run executes one plan end to end and prints the summary.
func (a *app) run(ctx context.Context, file string, o runOptions) (*runner.Report, error) {
	job, c, err := a.prepare(ctx, file, runner.Options{Restart: o.restart})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p := job.Plan
	out := a.resultsOut(p.Sink)
	printResolution(out, job)
	sink, err := a.newSink(ctx, job)
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	if job.NothingToDo() && !job.Fresh {
		// Run commits nothing then: it publishes output that a run which
		// crashed after its last commit staged, and makes the report.
		rep, err := job.Run(ctx, sink)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "nothing to do: plan %s already replayed every partition to its end (group %s); run 'replay reset' or use --restart to replay again\n", p.Name, p.Group)
		return nil, writeReport(o.report, rep)
	}
	a.log.Info().Str("plan", p.Name).Int64("offsets", job.Resolution.Total()).Msg("run started")
	rep, err := job.Run(ctx, sink)
	if rep != nil {
		printReport(out, rep, sinkWhere(p.Sink))
		read, written, skipped := rep.Totals()
		a.log.Info().Str("plan", p.Name).Int64("read", read).Int64("written", written).Int64("skipped", skipped).Msg("run finished")
		if werr := writeReport(o.report, rep); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if errors.Is(err, runner.ErrInterrupted) {
		return rep, fmt.Errorf("%w\nresume with: replay run %s", err, file)
	}
	return rep, err
}

// resultsOut is where run prints its tables: stdout, unless the sink is
// stdout (then it carries the records only, for pipes): stderr on a
// terminal, nowhere when stderr carries JSON logs.
func (a *app) resultsOut(s plan.Sink) io.Writer {
	switch {
	case s.Type != "stdout":
		return a.stdout
	case a.jsonLogs.Load():
		return io.Discard
	}
	return a.stderr
}

// newSink builds the plan's sink; the stdout sink writes to the app's stdout
// (sinks.New would write to os.Stdout).
func (a *app) newSink(ctx context.Context, job *runner.Job) (sinks.Sink, error) {
	p := job.Plan
	if p.Sink.Type == "stdout" {
		return sinks.NewStdout(a.stdout), nil
	}
	return sinks.New(ctx, p.Sink, sinks.Options{Log: a.log, PlanName: p.Name, RunID: job.RunID()})
}

func writeReport(path string, rep *runner.Report) error {
	if path == "" {
		return nil
	}
	return writeJSON(path, rep)
}

func sinkWhere(s plan.Sink) string {
	switch s.Type {
	case "file":
		return s.Path
	case "postgres":
		return "postgres table " + s.Table
	}
	return s.Type
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
