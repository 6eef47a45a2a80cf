package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// Output formats of validate.
const (
	formatText   = "text"
	formatJSON   = "json"
	formatGitHub = "github"
)

func (a *app) validateCmd() *cobra.Command {
	format := formatText
	cmd := &cobra.Command{
		Use:   "validate PLAN...",
		Short: "Check plans offline: schema, types and semantics (no network)",
		Long: "validate loads every plan and reports every problem of every file at once.\n" +
			"--format text (default): file:line:col: field: message, one per line, then a count.\n" +
			"--format json: one JSON document with every problem and a verdict per file.\n" +
			"--format github: GitHub Actions workflow commands (::error / ::warning file=,line=,col=), so a pull\n" +
			"request shows each problem on its line; file paths are printed as given, so run it from the repository root.\n" +
			"Warnings never fail. Exit 0 when all plans are valid, 2 when any is invalid.",
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			results := validateFiles(files, a.now)
			var err error
			switch format {
			case formatJSON:
				err = printValidateJSON(a.stdout, results)
			case formatGitHub:
				printValidateGitHub(a.stdout, results)
			default:
				printValidateText(a.stdout, results)
			}
			errs, _ := problemCounts(results)
			a.setExit(exitInvalid, errs > 0)
			return err
		},
	}
	cmd.Flags().Var(newChoiceFlag(&format, formatText, formatJSON, formatGitHub), "format", "output format: text, json or github (GitHub Actions annotations)")
	return cmd
}

// fileResult is what validate found in one plan file.
type fileResult struct {
	File        string `json:"file"`
	Valid       bool   `json:"valid"`
	Name        string `json:"name,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Errors      int    `json:"errors"`
	Warnings    int    `json:"warnings"`
	// NeedsEnv lists the ${VAR}s the plan needs that are unset here: the
	// fields holding them were checked for what can be without their
	// values, and the fingerprint is left out (it depends on them).
	NeedsEnv []string `json:"needs_env,omitempty"`
	problems []plan.Problem
}

func validateFiles(files []string, now func() time.Time) []fileResult {
	out := make([]fileResult, 0, len(files))
	for _, f := range files {
		r := fileResult{File: f}
		p, err := plan.Load(f, plan.LoadOptions{Now: now, AllowUnsetEnv: true, Sinks: registry.Catalog()})
		var inv *plan.InvalidError
		switch {
		case errors.As(err, &inv):
			r.problems, r.NeedsEnv = inv.Problems, inv.UnsetEnv
		case err != nil:
			r.problems = []plan.Problem{{File: f, Message: err.Error()}}
		default:
			r.problems, r.NeedsEnv = p.Warnings(), p.UnsetEnv()
			r.Name = p.Name
			if len(r.NeedsEnv) == 0 {
				r.Fingerprint = p.Fingerprint()
			}
		}
		for _, pr := range r.problems {
			if pr.Warning {
				r.Warnings++
			} else {
				r.Errors++
			}
		}
		r.Valid = r.Errors == 0
		out = append(out, r)
	}
	return out
}

// problemCounts are the errors and the warnings of all results.
func problemCounts(results []fileResult) (errs, warnings int) {
	for _, r := range results {
		errs, warnings = errs+r.Errors, warnings+r.Warnings
	}
	return errs, warnings
}

// summary is the last line of the text and github formats.
func summary(results []fileResult) string {
	if bad, _ := problemCounts(results); bad > 0 {
		return fmt.Sprintf("%d problem(s) in %d plan(s)", bad, len(results))
	}
	return fmt.Sprintf("%d plan(s) valid", len(results))
}

// severity is "error" or "warning".
func severity(pr plan.Problem) string {
	if pr.Warning {
		return "warning"
	}
	return "error"
}

// needsEnv is the notice for the variables a plan needs and that are
// unset here.
func needsEnv(names []string) string {
	return fmt.Sprintf("needs %s (unset here): the fields holding them were checked without their values", strings.Join(names, ", "))
}

func printValidateText(w io.Writer, results []fileResult) {
	for _, r := range results {
		for _, pr := range r.problems {
			fmt.Fprintln(w, pr.String())
		}
		if len(r.NeedsEnv) > 0 {
			fmt.Fprintf(w, "%s: notice: %s\n", r.File, needsEnv(r.NeedsEnv))
		}
	}
	fmt.Fprintln(w, summary(results))
}

// jsonProblem is a problem in the json format.
type jsonProblem struct {
	File     string `json:"file"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Field    string `json:"field,omitempty"`
	Severity string `json:"severity"` // error or warning
	Message  string `json:"message"`
}

func printValidateJSON(w io.Writer, results []fileResult) error {
	errs, warnings := problemCounts(results)
	doc := struct {
		Valid    bool          `json:"valid"`
		Errors   int           `json:"errors"`
		Warnings int           `json:"warnings"`
		Files    []fileResult  `json:"files"`
		Problems []jsonProblem `json:"problems"`
	}{Valid: errs == 0, Errors: errs, Warnings: warnings, Files: results, Problems: []jsonProblem{}}
	for _, r := range results {
		for _, pr := range r.problems {
			doc.Problems = append(doc.Problems, jsonProblem{File: pr.File, Line: pr.Line, Column: pr.Col, Field: pr.Field, Severity: severity(pr), Message: pr.Message})
		}
	}
	return writeJSON(w, doc)
}

// printValidateGitHub writes GitHub Actions workflow commands:
// ::error file=F,line=L,col=C,title=replay validate::field: message
func printValidateGitHub(w io.Writer, results []fileResult) {
	for _, r := range results {
		for _, pr := range r.problems {
			props := "file=" + ghProperty(pr.File)
			if pr.Line > 0 {
				props += fmt.Sprintf(",line=%d,col=%d", pr.Line, pr.Col)
			}
			msg := pr.Message
			if pr.Field != "" {
				msg = pr.Field + ": " + msg
			}
			fmt.Fprintf(w, "::%s %s,title=replay validate::%s\n", severity(pr), props, ghData(msg))
		}
		if len(r.NeedsEnv) > 0 {
			fmt.Fprintf(w, "::notice file=%s,title=replay validate::%s\n", ghProperty(r.File), ghData(needsEnv(r.NeedsEnv)))
		}
	}
	fmt.Fprintln(w, summary(results))
}

// ghData escapes a workflow command's message (GitHub's escapeData).
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a workflow command's property value (escapeProperty).
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
