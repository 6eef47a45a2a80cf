package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replay-tool/replay/runner"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// printResolution renders a job's ranges: what a run would read.
func printResolution(w io.Writer, job *runner.Job) {
	res := job.Resolution
	fmt.Fprintf(w, "plan %s (fingerprint %s)  topic %s  group %s\n", res.Plan, res.Fingerprint, res.Topic, res.Group)
	switch {
	case !job.Fresh:
		fmt.Fprintf(w, "resuming the run recorded in the group (ranges fixed when it was first resolved)\n")
	case !res.From.IsZero():
		to := "high watermark"
		if !res.To.IsZero() {
			to = res.To.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "window [%s, %s) resolved at %s\n", res.From.Format(time.RFC3339), to, res.ResolvedAt.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "offset window resolved at %s\n", res.ResolvedAt.Format(time.RFC3339))
	}
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tSTART\tEND\tRECORDS\tFROM\tREMAINING\tOUTCOME\tLOG START\tHIGH WATERMARK")
	var total, remaining int64
	for _, r := range res.Ranges {
		from := r.Start
		if off, ok := job.Resume[r.Partition]; ok {
			from = off
		}
		total += r.Records()
		remaining += max(r.End-from, 0)
		fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", r.Partition, r.Start, r.End, r.Records(), from, max(r.End-from, 0), r.Outcome, r.LogStart, r.HighWatermark)
	}
	fmt.Fprintf(t, "TOTAL\t\t\t%d\t\t%d\t\t\t\n", total, remaining)
	t.Flush()
	if len(job.Ignored) > 0 {
		fmt.Fprintf(w, "not part of this run: partitions %v\n", job.Ignored)
	}
}

// printReport renders the final summary of a run.
func printReport(w io.Writer, rep *runner.Report, where string) {
	t := table(w)
	fmt.Fprintln(t, "PARTITION\tOUTCOME\tSTART\tEND\tFROM\tNEXT\tREAD\tWRITTEN\tSKIPPED\tABORTED\tOUTSIDE WINDOW\tSTATUS")
	for _, p := range rep.Partitions {
		status := "done"
		switch {
		case p.Error != "":
			status = "failed"
		case !p.Done:
			status = "stopped"
		}
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\n", p.Partition, p.Outcome, p.Start, p.End, p.From, p.Next, p.Read, p.Written, skipped(p.Skipped), p.Aborted, p.OutsideWindow, status)
	}
	read, written, skip := rep.Totals()
	fmt.Fprintf(t, "TOTAL\t\t\t\t\t\t%d\t%d\t%d\t\t\t\n", read, written, skip)
	t.Flush()
	dur := rep.Finished.Sub(rep.Started)
	rate := 0.0
	if dur > 0 {
		rate = float64(written) / dur.Seconds()
	}
	fmt.Fprintf(w, "%d records written to %s in %s (%.0f records/s)\n", written, where, dur.Round(time.Millisecond), rate)
}

func skipped(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}
