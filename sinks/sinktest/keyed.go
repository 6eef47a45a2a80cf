package sinktest

import (
	"context"
	"slices"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// WithKeys returns a copy of batch whose records carry the idempotency
// keys keyer renders (record.Record.IdemKey), set as the runner's key stage
// sets them for a sink that writes use keys. A template that fails on a
// record returns the record's *record.Error.
func WithKeys(keyer *sinks.Keyer, use sinks.KeyUse, batch []record.Record) ([]record.Record, error) {
	out := slices.Clone(batch)
	if !keyer.Templated() {
		return out, nil
	}
	for i := range out {
		if !use.Needs(&out[i]) {
			continue
		}
		key, err := keyer.Key(&out[i])
		if err != nil {
			return nil, err
		}
		out[i].IdemKey = key
	}
	return out, nil
}

// Keyed returns s writing each batch WithKeys(keyer, its Keys): a
// template that fails on a record fails the Write with the record's error,
// and nothing of the batch reaches s.
func Keyed(s sinks.Sink, keyer *sinks.Keyer) sinks.Sink { return &keyedSink{Sink: s, keyer: keyer} }

type keyedSink struct {
	sinks.Sink
	keyer *sinks.Keyer
}

func (k *keyedSink) Write(ctx context.Context, batch []record.Record) error {
	out, err := WithKeys(k.keyer, k.Capabilities().Keys, batch)
	if err != nil {
		return err
	}
	return k.Sink.Write(ctx, out)
}
