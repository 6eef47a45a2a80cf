package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
)

func (a *app) validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PLAN...",
		Short: "Check plans offline: schema, types and semantics (no network)",
		Long: "validate loads every plan and reports every problem of every file at once as file:line:col: field: message.\n" +
			"Exit 0 when all plans are valid, 2 when any is invalid.",
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			var problems []plan.Problem
			for _, f := range files {
				p, err := plan.Load(f, plan.LoadOptions{})
				var inv *plan.InvalidError
				switch {
				case errors.As(err, &inv):
					problems = append(problems, inv.Problems...)
				case err != nil:
					problems = append(problems, plan.Problem{File: f, Message: err.Error()})
				default:
					problems = append(problems, p.Warnings()...)
				}
			}
			bad := 0
			for _, pr := range problems {
				fmt.Fprintln(a.stdout, pr.String())
				if !pr.Warning {
					bad++
				}
			}
			if bad > 0 {
				fmt.Fprintf(a.stdout, "%d problem(s) in %d plan(s)\n", bad, len(files))
				code := exitInvalid
				a.exit = &code
				return nil
			}
			fmt.Fprintf(a.stdout, "%d plan(s) valid\n", len(files))
			return nil
		},
	}
}
