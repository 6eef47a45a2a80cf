package runner

import (
	"context"
	"errors"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/sinks"
)

// decoder builds the decoder of the plan's decode: section and reaches its
// schema registry once, so that a wrong URL or refused credentials fail
// the run before any record is read; nil when the plan decodes nothing.
// The job's later runs reuse it.
// Registry requests retry within the plan's retry.max_elapsed.
func (j *Job) decoder(ctx context.Context) (*decode.Decoder, error) {
	if !j.Plan.Decode.Decodes() || j.dec != nil {
		return j.dec, nil
	}
	d, err := decode.New(pipeline.DecodeConfig(j.Plan), decode.Options{RetryBudget: time.Duration(j.Plan.Retry.MaxElapsed), Logger: j.opts.Log})
	if err != nil {
		return nil, err
	}
	if err := d.Check(ctx); err != nil {
		return nil, err
	}
	j.dec = d
	return d, nil
}

// ValueColumns returns the columns of the schema of value, a record's
// value in the Confluent wire format (decode.Decoder.Columns), for a sink
// that lays out its output from it (sinks.Options.ValueColumns). It
// builds the job's decoder when no run did yet.
func (j *Job) ValueColumns(ctx context.Context, value []byte) ([]sinks.SchemaColumn, error) {
	dec, err := j.decoder(ctx)
	if err != nil {
		return nil, err
	}
	if dec == nil {
		return nil, errors.New("the plan decodes no value (decode.value)")
	}
	return dec.Columns(ctx, value)
}
