package stdout

import (
	"context"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Open builds the stdout sink of a plan section of type stdout (its
// value_format): it writes to sp.Options.Stdout (nil: os.Stdout). It does
// not fail.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	s := New(sp.Options.Stdout)
	s.Format = encode.ValueFormat(plan.ConfigOf[Section](&sp.Plan).ValueFormat)
	return s, nil
}
