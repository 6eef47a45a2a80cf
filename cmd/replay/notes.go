package main

import (
	"fmt"
	"io"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/sinks/registry"
)

// printLosses says under the run summary which offsets of the window were
// deleted before they were read, and which partitions appeared during the
// run: the table cannot show either.
func printLosses(w io.Writer, rep *runner.Report) {
	for _, p := range rep.Partitions {
		what := "skipped (allow_data_loss)"
		if !p.Done {
			what = "the partition stopped at the first of them"
		}
		for _, g := range p.LostRanges {
			fmt.Fprintf(w, "partition %d: offsets %s (%d offsets) were deleted by retention or DeleteRecords before they were read: %s\n", p.Partition, g, g.Len(), what)
		}
	}
	if len(rep.Added) > 0 {
		fmt.Fprintf(w, "partitions %v were added to %s after the run was resolved and were not read (the ranges are fixed)\n", rep.Added, rep.Topic)
	}
}

// sinkNotes are what the plan's sink says it would write for the
// partitions' ranges (plan.SinkDescriptor.Notes): each range's records,
// with the bytes per record of the records sampled at its ends.
func sinkNotes(p *plan.Plan, parts []planPartition) []plan.SinkNote {
	d := registry.Describe(p.Sink)
	if d.Notes == nil {
		return nil
	}
	sizes := make([]plan.RangeSize, len(parts))
	for i, pp := range parts {
		sizes[i] = plan.RangeSize{Partition: pp.Partition, Records: pp.Records, Exact: pp.Exact}
		if pp.Remaining > 0 {
			sizes[i].BytesPerRecord = float64(pp.Bytes) / float64(pp.Remaining)
		}
	}
	return d.Notes(&p.Sink, sizes)
}

// printSinkNotes prints the sink's notes, a warning marked as one.
func printSinkNotes(w io.Writer, notes []plan.SinkNote) {
	for _, n := range notes {
		if n.Warning {
			fmt.Fprint(w, "warning: ")
		}
		fmt.Fprintln(w, n.Text)
	}
}
