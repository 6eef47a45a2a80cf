package pipeline

import (
	"context"
	"errors"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// DecodeConfig is the decoder configuration of p's decode: section.
func DecodeConfig(p *plan.Plan) decode.Config {
	d := p.Decode
	r := d.SchemaRegistry
	return decode.Config{
		Value: decode.Format(d.Value), Key: decode.Format(d.Key), AvroUnions: d.Avro.Unions,
		Registry: decode.RegistryConfig{
			URLs: r.URL, Username: r.Username, Password: r.Password, BearerToken: r.BearerToken,
			CAFile: r.TLS.CAFile, CertFile: r.TLS.CertFile, KeyFile: r.TLS.KeyFile,
		},
	}
}

// WithDecoder makes the decode stage decode the sides d decodes. ctx is
// the run's: a schema fetch a record waits for ends with it (the stages
// take no context of their own). A nil d leaves the stage the identity.
func WithDecoder(ctx context.Context, d *decode.Decoder) Option {
	return func(p *Pipeline) {
		if d == nil || !d.Decodes(decode.Value) && !d.Decodes(decode.Key) {
			return
		}
		p.decode = decodeStage(ctx, d)
	}
}

// decodeStage is the stage of Decode under ctx.
func decodeStage(ctx context.Context, d *decode.Decoder) stage {
	return func(r *record.Record) error { return Decode(ctx, d, r) }
}

// Decode decodes r's value and key, the sides d decodes (neither when nil:
// a tombstone or a missing key is not decoded), into r.Note.Decoded. A
// key or value that cannot be decoded is r's *record.Error wrapping the
// *decode.BadRecordError; another error (the registry unreachable past
// the retry budget, refused credentials) is returned as it is and fails
// the run.
func Decode(ctx context.Context, d *decode.Decoder, r *record.Record) error {
	var out record.Decoded
	if r.Value != nil && d.Decodes(decode.Value) {
		v, err := d.Decode(ctx, decode.Value, r.Value)
		if err != nil {
			return decodeError(r, err)
		}
		out.Value, out.ValueSchemaID = v.JSON, v.SchemaID
	}
	if r.Key != nil && d.Decodes(decode.Key) {
		k, err := d.Decode(ctx, decode.Key, r.Key)
		if err != nil {
			return decodeError(r, err)
		}
		out.Key, out.KeySchemaID = k.JSON, k.SchemaID
	}
	if out.Value == nil && out.Key == nil {
		return nil
	}
	if r.Note == nil {
		r.Note = &record.Note{}
	}
	r.Note.Decoded = &out
	r.Note.Value, r.Note.Parsed = nil, false // parsed again from the decoded value
	return nil
}

func decodeError(r *record.Record, err error) error {
	var bad *decode.BadRecordError
	if errors.As(err, &bad) {
		return record.NewError(r, bad)
	}
	return err
}
