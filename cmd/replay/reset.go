package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/group"
)

func (a *app) resetCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset PLAN",
		Short: "Delete the replay group's committed offsets for the plan's topic, so the next run starts over",
		Long: "reset deletes the replay group's committed offsets on the plan's topic (OffsetDelete, KIP-496): the next\n" +
			"'replay run' resolves the window afresh and replays it from the start. It asks you to type the group name on a\n" +
			"terminal; --yes skips the question (required when stdin is not a terminal).\n" +
			"It refuses (exit 3) a group with active members or not Empty/Dead, and a group holding any commit replay did not\n" +
			"make: replay never touches a live or foreign consumer group. The sink is not touched.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			return a.reset(cmd, files[0], yes)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func (a *app) reset(cmd *cobra.Command, file string, yes bool) error {
	ctx := cmd.Context()
	p, err := a.loadPlan(file)
	if err != nil {
		return err
	}
	in := cmd.InOrStdin()
	if !yes && !isTerminal(in) {
		return usageError{fmt.Errorf("reset deletes the commits of group %s and needs a confirmation, but stdin is not a terminal: pass --yes to reset without asking", p.Group)}
	}
	c, err := runner.Connect(ctx, p.Source, runner.WithProbeTimeout(a.probeTimeout), runner.WithRetryOf(p))
	if err != nil {
		return err
	}
	defer c.Close()
	plans, err := topicPlans(p)
	if err != nil {
		return err
	}
	// Every topic's group is checked before any commit is deleted.
	var cps [][]group.Checkpoint
	for _, tp := range plans {
		cp, err := c.CheckReset(ctx, tp)
		if err != nil {
			return err
		}
		cps = append(cps, cp)
	}
	topics := strings.Join(p.Topics(), ", ")
	// forget marks this machine's records of the plans' runs reset, so the
	// next run resolves the window afresh, and says so after msg.
	forget := func(msg, note string) error {
		for _, tp := range plans {
			if err := runner.ForgetRun(stateDir(), c, tp); err != nil {
				return fmt.Errorf("mark the local run record reset: %w", err)
			}
		}
		fmt.Fprintf(a.stdout, "%s\n'replay run %s' starts over and resolves the window afresh%s\n", msg, file, note)
		return nil
	}
	nothing := fmt.Sprintf("nothing to reset: group %s has no commit on %s", p.Group, topics)
	commits := describeTopicCommits(plans, cps) // "" when no topic has any
	if commits == "" {
		return forget(nothing, "")
	}
	if !yes {
		fmt.Fprintf(a.stderr, "This deletes the commits of group %s on %s.\n", p.Group, commits)
		ok, err := confirmReset(ctx, in, a.stderr, p.Group)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("reset cancelled: the answer was not the group name; nothing was deleted")
		}
	}
	var deleted [][]group.Checkpoint
	n := 0
	for _, tp := range plans {
		d, err := c.Reset(ctx, tp)
		if err != nil {
			return err
		}
		deleted = append(deleted, d)
		n += len(d)
	}
	if n == 0 {
		return forget(nothing, "")
	}
	note := ""
	if p.Window.From.IsRelative() || p.Window.To.IsRelative() || p.Window.Last.IsSet() {
		note = " (its relative bounds move with the clock)"
	}
	if err := forget("reset group "+p.Group+": deleted its commits on "+describeTopicCommits(plans, deleted), note); err != nil {
		return err
	}
	a.log.Info().Str("plan", p.Name).Str("group", p.Group).Str("topic", topics).Int("partitions", n).Msg("replay group reset")
	return nil
}

// describeTopicCommits says which partitions of each topic's plan hold
// commits of which plan in cps ("orders: partitions [0 1] of this plan
// (fingerprint ...)"), topics without any left out.
func describeTopicCommits(plans []*plan.Plan, cps [][]group.Checkpoint) string {
	var out []string
	for i, p := range plans {
		byPlan := map[string][]int32{}
		for _, cp := range cps[i] {
			who := fmt.Sprintf("plan %q (fingerprint %s)", cp.Plan, cp.Fingerprint)
			if cp.Fingerprint == p.Fingerprint() {
				who = fmt.Sprintf("this plan (fingerprint %s)", cp.Fingerprint)
			}
			byPlan[who] = append(byPlan[who], cp.Partition)
		}
		var parts []string
		for who, ps := range byPlan {
			parts = append(parts, fmt.Sprintf("partitions %v of %s", ps, who))
		}
		if len(parts) > 0 {
			sort.Strings(parts)
			out = append(out, p.Source.Topic+": "+strings.Join(parts, "; "))
		}
	}
	return strings.Join(out, "; ")
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// confirmReset asks for the group name on out and reads one line from in:
// true only when it is the group name exactly.
func confirmReset(ctx context.Context, in io.Reader, out io.Writer, group string) (bool, error) {
	fmt.Fprintf(out, "Type the group name (%s) to confirm: ", group)
	line, err := readAnswer(ctx, in)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(out)
		return false, errors.New("reset cancelled: nothing was deleted")
	case errors.Is(err, io.EOF):
		fmt.Fprintln(out)
		return false, errors.New("reset cancelled: the input ended before an answer; nothing was deleted")
	case err != nil:
		return false, fmt.Errorf("read confirmation: %w", err)
	}
	return strings.TrimSpace(line) == group, nil
}
