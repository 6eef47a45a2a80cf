// Package pipeline is the record pipeline: the stages every record goes
// through between the reader and the sink's Write, decode -> filter ->
// mapping -> key.
//
//   - decode turns keys and values in the Confluent wire format into JSON
//     by their writer's schema (the plan's decode:, record.Decoded), which
//     the later stages read as the value (record.Record.JSONValue).
//   - filter drops the records the plan's filter: expression leaves out.
//   - mapping runs the plan's set, rename and drop steps over the value
//     (internal/mapping); record.Note.Original keeps the value as read.
//   - key renders the sink's key template into the record's idempotency
//     key (record.Record.IdemKey), for the records whose key the sink
//     writes (sinks.Capabilities.Keys); sinks never compute a key.
//
// A stage the plan does not configure is the identity; a JSON value is
// parsed once, by the first stage that needs it. A Pipeline is built once
// from a validated plan and shared; each partition runs it through its own
// Run. The package is pure: no network, no I/O, but for the decoder it is
// handed (WithDecoder), which fetches schemas.
package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// stage changes a record in place, or fails on it with its *record.Error.
type stage func(r *record.Record) error

// Pipeline is a plan's record pipeline, compiled.
type Pipeline struct {
	// decode and mapping are nil for the identity.
	decode, mapping stage
	// filter is the plan's filter; nil without one.
	filter *filter.Program
	key    Key
	// decoder decodes under decodeCtx (WithDecoder); nil decodes nothing.
	decoder   *decode.Decoder
	decodeCtx context.Context
}

// Option is an option of New.
type Option func(*Pipeline)

// New builds the pipeline of p, a validated plan, for a sink that writes
// keys (its Capabilities().Keys). An error names the part of the plan that
// does not compile (filter, sink key), or a plan that decodes with no
// decoder given (WithDecoder).
func New(p *plan.Plan, keys sinks.KeyUse, opts ...Option) (*Pipeline, error) {
	prog, err := p.FilterProgram()
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	m, err := p.MappingProgram()
	if err != nil {
		return nil, fmt.Errorf("mapping: %w", err)
	}
	key, err := NewKey(p.Sink, keys)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{filter: prog, key: key}
	if m != nil {
		pl.mapping = m.Apply
	}
	for _, o := range opts {
		o(pl)
	}
	if p.Decode.Decodes() && pl.decode == nil && pl.decoder == nil {
		return nil, errors.New("decode: the plan decodes keys or values and no decoder was given")
	}
	return pl, nil
}

// Run is the pipeline as one partition runs it. It is not safe for
// concurrent use.
type Run struct {
	p      *Pipeline
	filter *filter.Filter
	// decoded holds the partition's decoded keys and values.
	decoded arena
}

// Partition returns a Run of p for one partition's goroutine.
func (p *Pipeline) Partition() *Run {
	r := &Run{p: p}
	if p.filter != nil {
		r.filter = filter.New(p.filter)
	}
	return r
}

// Identity reports whether every stage leaves every record as it is and
// passes it: the caller may skip Process.
func (r *Run) Identity() bool {
	p := r.p
	return p.decode == nil && p.decoder == nil && r.filter == nil && p.mapping == nil && p.key.keyer == nil
}

// Process runs rec through the stages in order, in place. It returns false
// for a record the filter leaves out. An error that is rec's
// *record.Error is for on_error: its key or value did not decode (a
// *decode.BadRecordError in its chain), the filter failed on it (a
// *filter.EvalError), the mapping did (a *mapping.StepError or a
// *mapping.ValueError) or the key template did (sinks.ErrKeyTemplate,
// sinks.ErrEmptyKey). Any other error fails the run: the schema registry
// could not be reached within the retry budget, or refused the
// credentials.
func (r *Run) Process(rec *record.Record) (bool, error) {
	p := r.p
	if p.decoder != nil {
		if err := r.decoded.decode(p.decodeCtx, p.decoder, rec); err != nil {
			return false, err
		}
	}
	if p.decode != nil {
		if err := p.decode(rec); err != nil {
			return false, err
		}
	}
	if r.filter != nil {
		if ok, err := r.filter.Match(rec); !ok || err != nil {
			return false, err
		}
	}
	if p.mapping != nil {
		if err := p.mapping(rec); err != nil {
			return false, err
		}
	}
	return true, p.key.Apply(rec)
}

// Key is the key stage of a sink: its section's key template, rendered for
// the records whose key the sink writes. The zero Key renders nothing: the
// records keep the default key.
type Key struct {
	// keyer is the template; nil without one, or for a sink that writes
	// no key.
	keyer *sinks.Keyer
	use   sinks.KeyUse
	// kafka: the sink is a kafka topic, whose message key the template
	// replaces.
	kafka bool
}

// NewKey compiles the key template of section (a sink's validated plan
// section) for a sink that writes use keys.
func NewKey(section plan.Sink, use sinks.KeyUse) (Key, error) {
	keyer, err := sinks.NewKeyer(section.Key)
	if err != nil {
		return Key{}, fmt.Errorf("sink key: %w", err)
	}
	if !keyer.Templated() || use == sinks.KeysUnused {
		return Key{}, nil
	}
	return Key{keyer: keyer, use: use, kafka: section.Type == "kafka"}, nil
}

// Apply sets r.IdemKey to the key the template renders for r, when the
// sink writes r's key. A template that fails on r returns r's
// *record.Error and leaves r.IdemKey as it was.
func (k Key) Apply(r *record.Record) error {
	if k.keyer == nil || !k.use.Needs(r) {
		return nil
	}
	key, err := k.keyer.Key(r)
	if err != nil {
		// A kafka sink without key: keeps the source key, a null one too.
		var re *record.Error
		if k.kafka && r.Key == nil && errors.As(err, &re) && errors.Is(err, sinks.ErrEmptyKey) {
			return record.NewError(r, fmt.Errorf("kafka sink: %w, and the record's key is null (a key template replaces the message key): drop key: to keep each record's own key, a null key included", re.Err))
		}
		return err
	}
	r.IdemKey = key
	return nil
}
