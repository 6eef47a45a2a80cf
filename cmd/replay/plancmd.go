package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
)

// planOptions are the flags of replay plan.
type planOptions struct {
	output     string
	out        string
	resolution string
	// shards is --shards, maxPerShard --max-records-per-shard: split the
	// resolution --out writes for several processes.
	shards      int
	maxPerShard int64
	shardsSet   bool // either flag given
}

func (a *app) planCmd() *cobra.Command {
	o := planOptions{output: "table"}
	cmd := &cobra.Command{
		Use:   "plan PLAN",
		Short: "Show what a run would read, per partition, and how long it would take (read-only)",
		Long: "plan resolves the window against the cluster and prints, per partition, the start and end offsets, the number of\n" +
			"offsets (records; compaction gaps and transaction markers make it an upper bound), the timestamps of the first and\n" +
			"last record of the range (read at each end), the bytes (key + value) estimated from those sampled records, and the\n" +
			"outcome; then the totals and the duration at the plan's throttle. Nothing is committed and no sink is touched.\n\n" +
			"--out FILE writes the resolution (plan fingerprint, per-partition ranges, resolved-at) as reviewable JSON;\n" +
			"'replay run PLAN --resolution FILE' then replays exactly those ranges, and refuses if the plan changed since.\n" +
			"--shards N (or --max-records-per-shard K) with --out splits the ranges into shards of about equal records, a large\n" +
			"partition into sub-ranges, and prints the shard table; 'replay run PLAN --resolution FILE --shard I/N' replays\n" +
			"shard I with its own replay group, at its share of the throttle; 'replay status PLAN --resolution FILE' shows them all.\n\n" +
			"Exit codes: 0 ok, 1 error, 2 invalid plan or usage, 3 refused for safety. With --detailed-exitcode (as terraform\n" +
			"plan): 0 nothing to do, 2 work to do, 1 any error, including an invalid plan or usage mistake, 3 refused for safety.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			o.shardsSet = cmd.Flags().Changed("shards") || cmd.Flags().Changed("max-records-per-shard")
			return a.plan(cmd.Context(), files[0], o)
		},
	}
	cmd.Flags().VarP(newChoiceFlag(&o.output, "table", "json"), "output", "o", "output format: table or json")
	cmd.Flags().StringVar(&o.out, "out", "", "write the resolution (fingerprint, ranges, resolved-at) as JSON to this file, for review and 'replay run --resolution'")
	cmd.Flags().StringVar(&o.resolution, "resolution", "", "show the ranges pinned by this resolution file (written by --out) instead of resolving the window again")
	cmd.Flags().IntVar(&o.shards, "shards", 0, "split the resolution --out writes into this many shards of about equal records, for 'replay run --resolution FILE --shard I/N' on several machines")
	cmd.Flags().Int64Var(&o.maxPerShard, "max-records-per-shard", 0, "split the resolution --out writes into as many shards as it takes for none to hold more than this many records")
	cmd.Flags().BoolVar(&a.detailedExit, "detailed-exitcode", false, "exit 0 when there is nothing to do, 2 when there is work to do, 1 on any error (invalid plans too)")
	return cmd
}

// plan prints what a run of file would do and optionally saves the resolution.
func (a *app) plan(ctx context.Context, file string, o planOptions) error {
	if p, err := a.loadPlanFile(file, false); err == nil && p.Window.IsSchedule() {
		return a.planSchedule(ctx, file, o)
	} else if err == nil && p.SeveralTopics() {
		return a.planTopics(ctx, file, o)
	}
	p, c, opts, err := a.connectPinned(ctx, file, o.resolution)
	if err != nil {
		return err
	}
	defer c.Close()
	// A job whose window retention cut comes with the error: its table
	// shows where.
	job, prepErr := runner.Prepare(ctx, c, p, opts)
	if cut := (*runner.CutError)(nil); job == nil || prepErr != nil && !errors.As(prepErr, &cut) {
		return prepErr
	}
	samples, err := job.Sample(ctx)
	if err != nil {
		return errors.Join(prepErr, fmt.Errorf("read the ends of the ranges: %w", err))
	}
	v := newPlanView(job, samples, o.resolution)
	a.describeSchemas(ctx, job, &v)
	show := func() error {
		if o.output == "json" {
			return writeJSON(a.stdout, v)
		}
		printPlan(a.stdout, v)
		return nil
	}
	if prepErr != nil {
		// Retention cut the window: the table shows where, then the error
		// says what to do; nothing is saved.
		v.Refused = true
		if err := show(); err != nil {
			return err
		}
		return prepErr
	}
	if v.Shards, err = shardPlan(job, v, o); err != nil {
		return err
	}
	if o.out != "" {
		b, err := runner.MarshalResolution(job.Resolution)
		if err == nil {
			err = os.WriteFile(o.out, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("write the resolution: %w", err)
		}
	}
	if err := show(); err != nil {
		return err
	}
	if o.output != "json" {
		if v.Shards != nil {
			printShards(a.stdout, v.Shards)
		}
		if o.out != "" && v.Shards != nil {
			fmt.Fprintf(a.stdout, "resolution saved to %s: review it, then run shard I of %d (I from 0 to %d) with 'replay run %s --resolution %s --shard I/%d'\n", o.out, v.Shards.Count, v.Shards.Count-1, file, o.out, v.Shards.Count)
		} else if o.out != "" {
			fmt.Fprintf(a.stdout, "resolution saved to %s: review it, then run 'replay run %s --resolution %s'\n", o.out, file, o.out)
		}
	}
	a.setExit(exitInvalid, a.detailedExit && !v.NothingToDo) // --detailed-exitcode: 2 = work to do
	return nil
}

// connectPinned loads plan file and connects to its cluster, with the
// runner options of `replay plan`: the ranges of a --resolution file
// (resolution, "" for none), the logger and the fixed instant.
func (a *app) connectPinned(ctx context.Context, file, resolution string) (*plan.Plan, *runner.Cluster, runner.Options, error) {
	opts, err := pinnedOptions(resolution)
	if err != nil {
		return nil, nil, opts, err
	}
	p, c, err := a.loadAndConnect(ctx, file)
	if err != nil {
		return nil, nil, opts, err
	}
	opts.Log, opts.At = a.log, a.at
	return p, c, opts, nil
}
