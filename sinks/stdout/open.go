package stdout

import (
	"context"

	"github.com/replay-tool/replay/sinks"
)

// Open builds the stdout sink (a plan section of type stdout has nothing
// to translate): it writes to os.Stdout. It does not fail.
func Open(context.Context, sinks.Spec) (sinks.Sink, error) { return New(nil), nil }
