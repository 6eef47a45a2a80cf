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
		p.decoder, p.decodeCtx = d, ctx
	}
}

// arenaSize is the size of the buffers a partition decodes into.
const arenaSize = 32 << 10

// notesPerSlab is how many records' notes a partition allocates at once.
const notesPerSlab = 128

// decodedNote is a decoded record's Note and Decoded, allocated together.
type decodedNote struct {
	note record.Note
	dec  record.Decoded
}

// arena is what one partition decodes into: record after record, the
// decoded JSON is appended to one buffer (each record's JSON a slice of
// it, clipped so that an append to it copies), and the notes are taken
// from a slab, so that a record costs no allocation of its own. A record
// keeps the buffer and the slab it uses alive while it is referenced.
type arena struct {
	buf   []byte
	notes []decodedNote
}

// decode decodes r's value and key, the sides d decodes, into
// r.Note.Decoded. A side that cannot be decoded is r's *record.Error
// wrapping the *decode.BadRecordError; another error fails the run.
func (a *arena) decode(ctx context.Context, d *decode.Decoder, r *record.Record) error {
	var out record.Decoded
	if r.Value != nil && d.Decodes(decode.Value) {
		v, err := a.side(ctx, d, decode.Value, r.Value)
		if err != nil {
			return decodeError(r, err)
		}
		out.Value, out.ValueSchemaID, out.ValueClean = v.JSON, v.SchemaID, v.Clean
	}
	if r.Key != nil && d.Decodes(decode.Key) {
		k, err := a.side(ctx, d, decode.Key, r.Key)
		if err != nil {
			return decodeError(r, err)
		}
		out.Key, out.KeySchemaID, out.KeyClean = k.JSON, k.SchemaID, k.Clean
	}
	if out.Value == nil && out.Key == nil {
		return nil
	}
	if len(a.notes) == cap(a.notes) {
		a.notes = make([]decodedNote, 0, notesPerSlab)
	}
	a.notes = a.notes[:len(a.notes)+1]
	dn := &a.notes[len(a.notes)-1]
	dn.dec = out
	if r.Note == nil {
		r.Note = &dn.note
	}
	r.Note.Decoded = &dn.dec
	r.Note.Value, r.Note.Parsed = nil, false // parsed again from the decoded value
	return nil
}

// side decodes b, one side of a record, into a's buffer.
func (a *arena) side(ctx context.Context, d *decode.Decoder, side decode.Side, b []byte) (decode.Decoded, error) {
	if need := 2*len(b) + 64; cap(a.buf)-len(a.buf) < need {
		a.buf = make([]byte, 0, max(arenaSize, need))
	}
	dst := a.buf[len(a.buf):len(a.buf)]
	v, err := d.AppendDecode(ctx, side, dst, b)
	if err != nil {
		return v, err
	}
	if cap(v.JSON) == cap(dst) { // in place: an append that grows changes the capacity
		a.buf = a.buf[:len(a.buf)+len(v.JSON)]
	}
	v.JSON = v.JSON[:len(v.JSON):len(v.JSON)]
	return v, nil
}

func decodeError(r *record.Record, err error) error {
	var bad *decode.BadRecordError
	if errors.As(err, &bad) {
		return record.NewError(r, bad)
	}
	return err
}
