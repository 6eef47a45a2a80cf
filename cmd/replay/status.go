package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks/registry"
)

// statusOptions are status's flags, named after them.
type statusOptions struct{ output, resolution string }

func (a *app) statusCmd() *cobra.Command {
	o := statusOptions{output: "table"}
	cmd := &cobra.Command{
		Use:   "status PLAN",
		Short: "Show a plan's progress from its replay group's commits (read-only)",
		Long: "status reads the replay group's committed offsets for the plan's topic and the partitions' current offsets and prints,\n" +
			"per partition, the committed offset, the fixed range, what remains and whether the commit belongs to this plan,\n" +
			"then the overall state: not started, in progress, done, belongs to another plan, or foreign (commits replay did\n" +
			"not make). With --resolution FILE of a sharded resolution, one line per shard (its own group) and the total.\n" +
			"Nothing is committed; the exit code is 0 whatever the state.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			p, c, err := a.loadAndConnect(cmd.Context(), files[0])
			if err != nil {
				return err
			}
			defer c.Close()
			if p.Window.IsSchedule() {
				_, err := a.printSchedule(cmd.Context(), c, p, o.output)
				return err
			}
			if o.resolution != "" {
				return a.shardStatus(cmd.Context(), c, p, files[0], o.resolution, o.output)
			}
			if p.SeveralTopics() {
				return a.statusTopics(cmd.Context(), c, p, files[0], o.output)
			}
			pr, err := c.Progress(cmd.Context(), p)
			if err != nil {
				return err
			}
			if pr.State == runner.StateNotStarted {
				if pr.Record, err = runner.ReadRunRecord(stateDir(), c, p); err != nil {
					return err
				}
			}
			if o.output == "json" {
				return writeJSON(a.stdout, pr)
			}
			printProgress(a.stdout, pr, files[0])
			if pr.State == runner.StateDone {
				if staged := unpublished(p.Sink); staged != "" {
					fmt.Fprintf(a.stdout, "not published: the staged output %s is still there (the publish failed, or the run was stopped after its last commit); 'replay run %s' publishes it\n", staged, files[0])
				}
			}
			return nil
		},
	}
	cmd.Flags().VarP(newChoiceFlag(&o.output, "table", "json"), "output", "o", "output format: table or json")
	cmd.Flags().StringVar(&o.resolution, "resolution", "", "show every shard of this sharded resolution file ('replay plan --shards N --out FILE'): done, running (and its holder), stopped, not started, and the total")
	return cmd
}

// unpublished returns the staging directory of a file sink's output when
// it exists ("" otherwise): a finished run whose output is not published.
// A relative path is resolved against the working directory, as by run.
func unpublished(s plan.Sink) string {
	d := registry.Describe(s)
	if d.StagingDir == nil {
		return ""
	}
	dir := d.StagingDir(&s)
	if st, err := os.Stat(dir); dir != "" && err == nil && st.IsDir() {
		return dir
	}
	return ""
}

// loadAndConnect loads the plan and connects to its cluster, without the
// group checks of a run: status and reset decide what to refuse themselves.
func (a *app) loadAndConnect(ctx context.Context, file string) (*plan.Plan, *runner.Cluster, error) {
	p, err := a.loadPlan(file)
	if err != nil {
		return nil, nil, err
	}
	c, err := runner.Connect(ctx, p.Source, runner.WithProbeTimeout(a.probeTimeout), runner.WithRetryOf(p))
	if err != nil {
		return nil, nil, err
	}
	for _, w := range c.Warnings { // insecure_skip_verify, PLAIN without TLS
		a.log.Warn().Str("plan", p.Name).Msg(w)
	}
	return p, c, nil
}

// loadPlan loads and validates the plan (offline) and logs its warnings. A
// file that cannot be read is a usage mistake (exit 2), as for run.
func (a *app) loadPlan(file string) (*plan.Plan, error) {
	p, err := a.loadPlanFile(file, false)
	if err != nil {
		return nil, err
	}
	for _, w := range p.Warnings() {
		a.log.Warn().Str("plan", p.Name).Msg(w.String())
	}
	return p, nil
}

// printProgress renders a plan's progress as a table and a state line.
func printProgress(w io.Writer, pr *runner.Progress, file string) {
	fmt.Fprintf(w, "plan %s (fingerprint %s)  topic %s  group %s (%s, %d members)\n", pr.Plan, pr.Fingerprint, pr.Topic, pr.Group, cmp.Or(pr.GroupState, "-"), pr.Members)
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tCOMMITTED\tSTART\tEND\tREMAINING\tDONE\tLOG START\tHIGH WATERMARK\tCOMMITTED BY")
	for _, pp := range pr.Partitions {
		done := "-"
		if pp.Replay {
			done = fmt.Sprintf("%.1f%%", pp.PercentDone)
		}
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", pp.Partition, offsetOrDash(pp.Committed), offsetOrDash(pp.Start), offsetOrDash(pp.End),
			offsetOrDash(pp.Remaining), done, pp.LogStart, pp.HighWatermark, committedBy(pp))
	}
	switch {
	case pr.State == runner.StateForeign || pr.State == runner.StateOtherPlan:
		// replay run refuses the group: a percentage (100% of no replay
		// commit) would read as done.
		records, remaining, refusal := "-", "-", string(pr.State)
		if pr.Records > 0 {
			records, remaining = fmt.Sprint(pr.Records), fmt.Sprint(pr.Remaining)
		}
		if pr.State == runner.StateOtherPlan {
			refusal = "other plan"
		}
		fmt.Fprintf(t, "TOTAL\t\t\t%s\t%s\trefused: %s\t\t\t\n", records, remaining, refusal)
	case pr.Records > 0 || pr.State != runner.StateNotStarted:
		fmt.Fprintf(t, "TOTAL\t\t\t%d\t%d\t%.1f%%\t\t\t\n", pr.Records, pr.Remaining, pr.PercentDone)
	}
	t.Flush()
	for _, pp := range pr.Partitions {
		if pp.Lost > 0 {
			fmt.Fprintf(w, "partition %d: retention deleted %d offsets after the checkpoint %d (log start %d): a resume fails there unless the plan sets allow_data_loss\n",
				pp.Partition, pp.Lost, pp.Committed, pp.LogStart)
		}
	}
	fmt.Fprintln(w, "state: "+stateLine(pr, file))
	if pr.State == runner.StateInProgress {
		fmt.Fprintf(w, "eta: %s at the plan's throttle\n", pr.ETA)
	}
}

func stateLine(pr *runner.Progress, file string) string {
	switch pr.State {
	case runner.StateNotStarted:
		if r := pr.Record; r != nil {
			return fmt.Sprintf("commits lost: group %s has no commit on %s, but the local run record %s (%s, written %s) records progress of this plan: the group's offsets probably expired (offsets.retention.minutes) or were deleted; 'replay run %s' refuses: add --resume-from-sink to continue from the sink's checkpoint table, or --restart to start over",
				pr.Group, pr.Topic, r.Path(), r.State, r.UpdatedAt.UTC().Format(time.RFC3339), file)
		}
		return fmt.Sprintf("not started: group %s has no commit on %s; 'replay plan %s' shows the ranges, 'replay run %s' starts", pr.Group, pr.Topic, file, file)
	case runner.StateInProgress:
		done := fmt.Sprintf("%d of %d offsets replayed (%.1f%%), %d remaining", pr.Replayed, pr.Records, pr.PercentDone, pr.Remaining)
		switch g := pr.GroupState; {
		case pr.Holder != "" && pr.HolderGone:
			return fmt.Sprintf("stopped: %s; the run that held the group (%s) is gone (killed): the group lets go of it at its session timeout, and a run of the plan on this machine at once: 'replay run %s' resumes", done, pr.Holder, file)
		case pr.Holder != "":
			return fmt.Sprintf("in progress: %s; a run of this plan holds the group (%s): it is running, or died less than a session timeout ago", done, pr.Holder)
		case g != "" && g != "Empty" && g != "Dead":
			return fmt.Sprintf("in progress: %s; the group is %s: processes are running it (replay run --join)", done, g)
		}
		return fmt.Sprintf("in progress: %s; 'replay run %s' resumes", done, file)
	case runner.StateDone:
		return fmt.Sprintf("done: every partition was replayed to its end (%d offsets); a re-run does nothing ('replay reset %s' to replay again)", pr.Records, file)
	case runner.StateOtherPlan:
		return fmt.Sprintf("belongs to another plan: group %s holds the checkpoints of plan %q (fingerprint %s), not of this plan (fingerprint %s); 'replay run' refuses: use --restart or 'replay reset %s' to discard them, or another group",
			pr.Group, pr.OtherPlan, pr.OtherFingerprint, pr.Fingerprint, file)
	case runner.StateForeign:
		where := pr.Topic
		if pr.Foreign != nil {
			where = pr.Foreign.String()
		}
		return fmt.Sprintf("foreign: group %s has commits on %s that replay did not make: it is, or was, a real consumer group; replay will neither run in it nor reset it: name a dedicated group such as replay.%s", pr.Group, where, pr.Plan)
	}
	return string(pr.State)
}

func committedBy(pp runner.PartitionProgress) string {
	switch {
	case pp.Committed < 0:
		return "-"
	case !pp.Replay:
		return "not replay"
	case pp.ThisPlan:
		return "this plan"
	}
	return fmt.Sprintf("plan %s (%s)", pp.Plan, pp.Fingerprint)
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
