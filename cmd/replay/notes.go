package main

import (
	"fmt"
	"io"

	"github.com/replay-tool/replay/runner"
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
