package sinktest

import (
	"context"
	"slices"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Keyed returns s writing each batch with the idempotency keys keyer
// renders (record.Record.IdemKey), set on a copy of the batch as the
// runner's key stage sets them for the Keys s uses: a template that fails
// on a record fails the Write with the record's *record.Error, and nothing
// of the batch reaches s.
func Keyed(s sinks.Sink, keyer *sinks.Keyer) sinks.Sink { return &keyedSink{Sink: s, keyer: keyer} }

type keyedSink struct {
	sinks.Sink
	keyer *sinks.Keyer
}

func (k *keyedSink) Write(ctx context.Context, batch []record.Record) error {
	use, out := k.Capabilities().Keys, slices.Clone(batch)
	for i := range out {
		if !k.keyer.Templated() || !use.Needs(&out[i]) {
			continue
		}
		key, err := k.keyer.Key(&out[i])
		if err != nil {
			return err
		}
		out[i].IdemKey = key
	}
	return k.Sink.Write(ctx, out)
}
