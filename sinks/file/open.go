package file

import (
	"context"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Open builds the file sink sp describes (a validated plan section of type
// file), holding the lock of its output until Close. On error the Sink is
// nil.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	s, err := New(Config{Path: c.Path, RunID: sp.Options.RunID, Format: c.Format, Columns: c.Columns, PerPartition: c.PerPartition,
		Interleave:  c.Order == OrderInterleaved && !sp.Options.DeadLetter,
		ValueFormat: encode.ValueFormat(c.ValueFormat), Overwrite: c.Overwrite, Partitions: sp.Options.Partitions, Log: sp.Options.Log})
	if err != nil {
		return nil, err
	}
	return s, nil
}
