package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// loadPlanFile loads a plan file (offline: allowing ${VAR}s unset here). A
// file that cannot be read is a usage mistake (exit 2, like an invalid
// plan), not a failed run (1). From then on the plan's secrets are
// redacted from the output.
func (a *app) loadPlanFile(file string, offline bool) (*plan.Plan, error) {
	p, err := plan.Load(file, plan.LoadOptions{Now: a.now, AllowUnsetEnv: offline, Sinks: registry.Catalog()})
	if p != nil {
		a.secrets.r.Store(plan.NewRedactor(p.Secrets()...))
	}
	var invalid *plan.InvalidError
	if err != nil && !errors.As(err, &invalid) {
		return nil, usageError{err}
	}
	return p, err
}

// pinnedOptions reads the resolution file of --resolution, if given. A
// file that cannot be read or is not a resolution is a usage mistake.
func pinnedOptions(path string) (runner.Options, error) {
	if path == "" {
		return runner.Options{}, nil
	}
	res, err := runner.ReadResolution(path)
	if err != nil {
		return runner.Options{}, usageError{fmt.Errorf("--resolution: %w", err)}
	}
	return runner.Options{Pinned: res}, nil
}

// runOptions are run's flags, named after them; in is where the answer
// to the confirmation is read.
type runOptions struct {
	restart, yes, join, resumeFromSink bool
	report, resolution, metricsAddr    string
	interval, shard                    string
	maxIntervals                       int
	in                                 io.Reader
	// noRecord keeps no local run record (the demo's throwaway broker).
	noRecord bool
	// interval's resume hint is its schedule's (runSchedule).
	ofSchedule bool
}

func (a *app) runCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run PLAN",
		Short: "Replay the plan's window into its sink, resumably",
		Long: "run resolves the window (or resumes the run recorded in the replay group), prints the ranges, asks for\n" +
			"confirmation, then reads exactly those offsets, writes them to the sink and commits progress to the replay group\n" +
			"after every durable batch.\n" +
			"On a terminal it asks before writing (or discarding checkpoints with --restart) unless --yes is given. When stdin\n" +
			"is not a terminal (schedulers, CI) it never asks and requires --yes.\n" +
			"--resolution FILE replays exactly the ranges 'replay plan --out FILE' saved; it refuses (exit 3) when the plan's\n" +
			"fingerprint differs from the file's or the group holds this plan's checkpoints for other ranges.\n" +
			"SIGINT/SIGTERM finish the in-flight batch, commit and stop within 10 s; re-run the same command to resume.\n" +
			"--join runs the plan on several machines at once: every process joins the replay group, Kafka spreads the\n" +
			"partitions among them, and when one stops or dies its partitions move to the others, which continue from its\n" +
			"last commit. Start every process with the same --resolution file (or after a run of the plan is recorded in the\n" +
			"group). postgres, kafka and http sinks only; the throttle is the whole group's, each process taking the share of its partitions.\n" +
			"--shard I/N runs shard I of a resolution that 'replay plan --shards N --out FILE' split: with its own replay group\n" +
			"(GROUP.shard-I-of-N), its share of the throttle and, for a file sink, its own file ({shard} in the path). Exit 3\n" +
			"(refused) is final for a shard; exit 1 is worth a retry.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			o.in = cmd.InOrStdin()
			started := time.Now().UTC()
			rep, err := a.run(cmd.Context(), files[0], o)
			var badPath reportPathError
			if err != nil && rep == nil && o.report != "" && !errors.As(err, &badPath) {
				// Refused, failed before reading, or started wrongly (no
				// --yes): a scheduler still gets a report, saying why.
				rep := &runner.Report{PlanFile: files[0], Started: started, Finished: time.Now().UTC(), Error: err.Error()}
				a.identify(rep, files[0])
				if werr := a.writeReport(o.report, rep, err); werr != nil {
					a.log.Warn().Err(werr).Msg("could not write the report")
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation (required when stdin is not a terminal)")
	cmd.Flags().BoolVar(&o.restart, "restart", false, "discard checkpoints of a previous, different version of this plan in the group and start over (a group that lost its commits: the recorded ranges from their start)")
	cmd.Flags().BoolVar(&o.resumeFromSink, "resume-from-sink", false, "the group lost its commits (expired offsets): continue from the sink's own checkpoints ("+registry.Catalog().CheckpointKeepers()+")")
	cmd.Flags().StringVar(&o.resolution, "resolution", "", "replay exactly the ranges of this resolution file (written by 'replay plan --out')")
	cmd.Flags().StringVar(&o.shard, "shard", "", "run shard I (0-based) of the N shards of the --resolution file ('replay plan --shards N --out FILE'), e.g. 0/4 or $JOB_COMPLETION_INDEX/4")
	cmd.Flags().StringVar(&o.report, "report", "", "write the run report as JSON to this file")
	cmd.Flags().BoolVar(&o.join, "join", false, "share the plan with other 'replay run --join' processes: join the replay group and take the partitions it assigns")
	cmd.Flags().StringVar(&o.interval, "interval", "", "schedule plans: re-run the interval that contains (or starts at) this RFC 3339 time, without moving the schedule's progress")
	cmd.Flags().IntVar(&o.maxIntervals, "max-intervals", 0, "schedule plans: run at most this many due intervals in this invocation (0: all, oldest first)")
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the run at http://HOST:PORT/metrics while it runs (port 0: any free port, logged)")
	return cmd
}

// reportPathError marks a --report path that cannot be written: no report
// can say so.
type reportPathError struct{ error }

func (e reportPathError) Unwrap() error { return e.error }

// identify fills what the report of a run that never started says about
// its plan (name, fingerprint, topic, group, sink), when the plan file is
// valid; a report without them cannot be matched to the plan.
func (a *app) identify(rep *runner.Report, file string) {
	p, err := plan.Load(file, plan.LoadOptions{Now: a.now, Sinks: registry.Catalog()})
	if err != nil {
		return
	}
	rep.Plan, rep.Fingerprint, rep.Topic, rep.Group, rep.Sink = p.Name, p.Fingerprint(), p.Source.Topic, p.Group, string(p.Sink.Type)
	if p.SeveralTopics() {
		rep.Topics = p.Topics()
	}
}

// run executes one plan end to end and prints the summary.
func (a *app) run(ctx context.Context, file string, o runOptions) (*runner.Report, error) {
	opts, err := a.runnerOptions(o)
	if err != nil {
		return nil, err
	}
	metrics, err := listenMetrics(o.metricsAddr)
	if err != nil {
		return nil, err
	}
	defer metrics.stop()
	opts.At = a.at
	p, c, err := a.loadAndConnect(ctx, file)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if p.Window.IsSchedule() {
		return a.runSchedule(ctx, c, p, file, o, opts, metrics)
	}
	if o.interval != "" || o.maxIntervals != 0 {
		return nil, usageError{fmt.Errorf("--interval and --max-intervals apply to a plan with a schedule window (every, start); %s has a %s window", file, p.Window.Kind())}
	}
	if p.SeveralTopics() {
		return a.runTopics(ctx, c, p, file, o, opts, metrics)
	}
	if p, err = a.shardRun(p, &opts, o); p == nil || err != nil {
		return nil, err
	}
	if o.resumeFromSink && !keepsCheckpoints(p) {
		return nil, usageError{fmt.Errorf("--resume-from-sink: the %s sink of %s keeps no checkpoints of its own: only %s does (and not with on_error: dead_letter); use --restart to start over", p.Sink.Type, file, registry.Catalog().CheckpointKeepers())}
	}
	opts.Log = a.log
	if d := registry.Describe(p.Sink); !o.join && (d.FencesOthers == nil || !d.FencesOthers(&p.Sink)) {
		// The run holds its plan's group: a second run or a reset is
		// refused naming it. An exactly-once kafka sink commits standalone,
		// which a held group refuses; its transactional ids fence instead.
		hold, err := a.holdGroup(ctx, c, p, o.shard != "")
		if err != nil {
			return nil, err
		}
		defer hold.Release()
		opts.Hold = hold
	}
	job, err := runner.Prepare(ctx, c, p, opts)
	if cut := (*runner.CutError)(nil); errors.As(err, &cut) && job != nil {
		printResolution(a.resultsOut(p.Sink), job) // where retention cut the window
	}
	if err != nil {
		return nil, err
	}
	if err := joinableSinks(o.join, p); err != nil {
		return nil, err
	}
	if err := a.showJobs(ctx, a.resultsOut(p.Sink), o, job); err != nil {
		return nil, err
	}
	return a.runJob(ctx, job, file, o, metrics)
}

// showJobs prints the jobs' ranges and the --resolution file that pinned
// them, then asks to go ahead unless --yes.
func (a *app) showJobs(ctx context.Context, out io.Writer, o runOptions, jobs ...*runner.Job) error {
	for _, job := range jobs {
		printResolution(out, job)
	}
	if o.resolution != "" {
		fmt.Fprintf(out, "ranges pinned by %s\n", o.resolution)
	}
	if o.yes {
		return nil
	}
	return a.confirmRun(ctx, o.in, jobs...)
}

// runnerOptions returns the runner's options run's flags (o) give: the
// ranges of a --resolution file, --restart, --join, --resume-from-sink,
// where runs are recorded, and the progress lines. It refuses (usage
// errors) asking for confirmation without a terminal and the unsafe
// combinations of --join, --restart and --resume-from-sink.
func (a *app) runnerOptions(o runOptions) (runner.Options, error) {
	switch {
	case !o.yes && !isTerminal(o.in):
		return runner.Options{}, usageError{errors.New("stdin is not a terminal, so replay run cannot ask for confirmation: add --yes to run without asking (schedulers, CI)")}
	case o.join && o.restart:
		return runner.Options{}, usageError{errors.New("--join and --restart: discarding the checkpoints other processes of the plan are using is not safe; stop them all, then --restart without --join")}
	case o.resumeFromSink && (o.restart || o.join):
		return runner.Options{}, usageError{errors.New("--resume-from-sink continues a plain run from the sink's checkpoints: it does not combine with --restart (start over) or --join")}
	}
	opts, err := pinnedOptions(o.resolution)
	if err != nil {
		return runner.Options{}, err
	}
	if err := checkWritable(o.report); err != nil {
		return runner.Options{}, usageError{reportPathError{fmt.Errorf("--report: %w", err)}}
	}
	opts.Restart, opts.Join, opts.ResumeFromSink = o.restart, o.join, o.resumeFromSink
	if !o.noRecord {
		opts.StateDir = stateDir()
	}
	if a.console != nil {
		opts.ProgressEvery = -1 // a terminal: the progress display replaces the log lines
	}
	return opts, nil
}

// runJob writes a prepared job into a new sink, prints its summary and
// writes its report.
func (a *app) runJob(ctx context.Context, job *runner.Job, file string, o runOptions, metrics *metricsServer) (*runner.Report, error) {
	p := job.Plan
	rep, nothing, err := a.replayJob(ctx, job, file, o, func() { metrics.serve(a, job) })
	if nothing {
		if err != nil || rep == nil {
			return nil, err
		}
		a.sayNothingToDo(a.resultsOut(p.Sink), p, fmt.Sprintf("nothing to do: plan %s already replayed every partition to its end (group %s); run 'replay reset' or use --restart to replay again", p.Name, p.Group))
		return nil, a.writeReport(o.report, rep, nil)
	}
	if rep != nil {
		if werr := a.writeReport(o.report, rep, err); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return rep, withResumeHint(err, file, o)
}

// sayNothingToDo prints msg, that a run of p has nothing to do, on out; on
// io.Discard (a stdout sink with JSON logs on stderr) it logs it instead.
func (a *app) sayNothingToDo(out io.Writer, p *plan.Plan, msg string) {
	if out != io.Discard {
		fmt.Fprintln(out, msg)
		return
	}
	a.log.Info().Str("plan", p.Name).Str("group", p.Group).Msg(msg)
}

// withResumeHint adds the command that resumes the run to err when a
// re-run would resume it.
func withResumeHint(err error, file string, o runOptions) error {
	if h := fault.HintOf(err); !o.ofSchedule && (errors.Is(err, runner.ErrInterrupted) || h == fault.HintResume || h == fault.HintSinkResume) {
		return fmt.Errorf("%w\nresume with: %s", err, resumeCommand(file, o))
	}
	return err
}

// replayJob writes a prepared job into a new sink and prints its summary;
// started is called when records start to flow. nothing reports a job
// with nothing left to do (rep: the report of publishing what a crashed
// run staged; nil under --join).
func (a *app) replayJob(ctx context.Context, job *runner.Job, file string, o runOptions, started func()) (rep *runner.Report, nothing bool, err error) {
	p := job.Plan
	out := a.resultsOut(p.Sink)
	sink, err := a.newSink(ctx, job, o.join)
	if err != nil {
		if ctx.Err() != nil { // a signal while the sink opened: nothing was written
			return nil, false, fmt.Errorf("%w: stopped while the sink was opening (nothing was written or committed): %w\nresume with: %s", runner.ErrInterrupted, err, resumeCommand(file, o))
		}
		return nil, false, err
	}
	var stopped atomic.Int64 // when ctx was cancelled (the signal), in Unix nanoseconds
	context.AfterFunc(ctx, func() { stopped.Store(time.Now().UnixNano()) })
	defer func() { a.closeSink(ctx, sink, time.Unix(0, stopped.Load())) }()
	a.running.Store(true) // from here a signal finishes the in-flight batch
	if job.NothingToDo() && !job.Fresh && o.join {
		fmt.Fprintf(out, "nothing to do: plan %s already replayed every partition to its end (group %s)\n", p.Name, p.Group)
		return nil, true, nil
	}
	if job.NothingToDo() && !job.Fresh {
		// Run commits nothing then: it publishes what a run that crashed
		// after its last commit staged, or rewrites output lost since.
		rep, err := job.Run(ctx, sink)
		if rep == nil || rep.NothingToDo {
			return rep, true, err
		}
		a.printRun(out, job, file, rep, err)
		return rep, false, err
	}
	a.log.Info().Str("plan", p.Name).Str("topic", p.Source.Topic).Int64("offsets", job.Resolution.Total()).Msg("run started")
	started()
	stopProgress := func() {}
	if !job.NothingToDo() && a.showsProgress(p.Sink) {
		stopProgress = a.showProgress(job)
	}
	if o.join {
		rep, err = job.RunJoined(ctx, sink)
		if le := (*runner.LocalOutputError)(nil); errors.As(err, &le) {
			err = fmt.Errorf("--join: %w", err)
		}
	} else {
		rep, err = job.Run(ctx, sink)
	}
	stopProgress()
	a.printRun(out, job, file, rep, err)
	return rep, false, err
}

// printRun prints the summary of a run of job (rep nil: none) and logs
// its totals; err is how the run ended.
func (a *app) printRun(out io.Writer, job *runner.Job, file string, rep *runner.Report, err error) {
	if rep == nil {
		return
	}
	p := job.Plan
	rep.PlanFile = file
	if err != nil {
		rep.Error = err.Error()
	}
	if p.OfTopicSet() {
		fmt.Fprintf(out, "topic %s:\n", p.Source.Topic)
	}
	printReport(out, rep, sinkWhere(p.Sink))
	read, written, skipped := rep.Totals()
	a.log.Info().Str("plan", p.Name).Str("topic", p.Source.Topic).Int64("read", read).Int64("written", written).Int64("skipped", skipped).Msg("run finished")
}

// keepsCheckpoints reports whether p's sink records checkpoints of its own
// that a run uses (its descriptor's Checkpoints names them, and the plan
// has no dead letters).
func keepsCheckpoints(p *plan.Plan) bool {
	d := registry.Describe(p.Sink)
	return d.Checkpoints != nil && d.Checkpoints(&p.Sink) != "" && p.OnError != plan.OnErrorDeadLetter
}

// resultsOut is where run prints its tables: stdout, unless the sink is
// stdout (then it carries the records only, for pipes): stderr on a
// terminal, nowhere when stderr carries JSON logs.
func (a *app) resultsOut(s plan.Sink) io.Writer {
	switch {
	case !registry.Describe(s).WritesStdout:
		return a.stdout
	case a.jsonLogs.Load():
		return io.Discard
	}
	return a.stderr
}

// newSink builds the plan's sink; a sink writing to standard output
// writes to the app's stdout, unredacted (records are data). Under --join
// (join) the sink learns the process's member of the group.
func (a *app) newSink(ctx context.Context, job *runner.Job, join bool) (sinks.Sink, error) {
	p := job.Plan
	parts := make([]int32, len(job.Resolution.Ranges))
	ranges := make([]sinks.Range, len(job.Resolution.Ranges))
	for i, r := range job.Resolution.Ranges {
		parts[i] = r.Partition
		ranges[i] = sinks.Range{Partition: r.Partition, Start: r.Start, End: r.End}
	}
	opts := sinks.Options{Log: a.log, PlanName: p.Name, RunID: job.RunID(), Group: p.Group, Fingerprint: job.Resolution.Fingerprint,
		Topic: job.Resolution.Topic, Partitions: parts, Ranges: ranges, CommitMetadata: job.CommitMetadata, SourceClusterID: job.SourceClusterID(),
		Stdout: a.rawStdout, Mapped: len(p.Mapping) > 0, DecodedValue: p.Decode.DecodesValue(), DecodedKey: p.Decode.DecodesKey()}
	if join {
		opts.Member = job.Member
	}
	if p.Decode.DecodesValue() {
		opts.ValueColumns = job.ValueColumns
	}
	return registry.New(ctx, p.Sink, opts)
}

// reportFile is what --report writes: the run's report and the code the
// process exits with.
type reportFile struct {
	*runner.Report
	ExitCode int `json:"exit_code"`
}

// writeReport writes rep (a *runner.Report or a *scheduleReport) to path
// as indented JSON, secrets redacted, with the exit code of err, the error
// the command returns ("": no --report).
func (a *app) writeReport(path string, rep any, err error) error {
	if path == "" {
		return nil
	}
	code := a.verdictOf(err).code
	switch r := rep.(type) {
	case *runner.Report:
		rep = reportFile{Report: r, ExitCode: code}
	case *scheduleReport:
		r.ExitCode = code
	}
	// A run refused before checkWritable created the directory (a usage
	// error) still writes its report.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("--report: create the directory of %s: %w", path, err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(a.secrets.redact(b), '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

// checkWritable checks, before a run connects, that a file can be written
// at path (os.WriteFile's way): an existing file is opened for writing
// without changing it; a new one is created and removed again; a missing
// directory is created (as the file sink creates its own). "" is fine.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: name a file, e.g. %s", path, filepath.Join(path, "report.json"))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			defer os.Remove(path)
		}
	}
	if err != nil {
		return err
	}
	return f.Close()
}

func sinkWhere(s plan.Sink) string {
	if d := registry.Describe(s); d.Where != nil {
		return d.Where(&s)
	}
	return string(s.Type)
}

// resumeCommand is the command that resumes an interrupted run: the same
// plan with the flags that matter for it (--yes where the first run had it,
// the pinned resolution, --join).
func resumeCommand(file string, o runOptions) string {
	cmd := "replay run " + file
	if o.yes {
		cmd += " --yes"
	}
	if o.join {
		cmd += " --join"
	}
	if o.resolution != "" {
		cmd += " --resolution " + o.resolution
	}
	if o.shard != "" {
		cmd += " --shard " + o.shard
	}
	return cmd
}

// closeSink closes sink; after an interruption (ctx cancelled at stopped)
// it waits only until runner.SignalTime after the signal (less a margin,
// at least a moment): a frozen server must not hold the process. What is
// committed is durable already; closing only releases connections.
func (a *app) closeSink(ctx context.Context, sink sinks.Sink, stopped time.Time) {
	if ctx.Err() == nil {
		sink.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink.Close()
	}()
	wait := max(time.Until(stopped.Add(runner.SignalTime-500*time.Millisecond)), 200*time.Millisecond)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.log.Warn().Dur("waited", wait).Msg("the sink did not close in time after the signal; exiting without waiting for it (everything committed is in the sink)")
	}
}
