package filter

import (
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// KeyEnv is what an expression compiled by CompileDecodedKey sees of a
// record: Env with the key decoded from the Confluent wire format (plan
// decode.key) as JSON, read like the value (key.id; a missing field is
// nil; numbers are numbers): an object as map[string]any, a scalar as
// itself (a string, a json.Number), nil for a record without a key.
type KeyEnv struct {
	Key       any               `expr:"key"`
	Value     any               `expr:"value"`
	Headers   map[string]string `expr:"headers"`
	Timestamp time.Time         `expr:"timestamp"`
	Partition int               `expr:"partition"`
	Offset    int               `expr:"offset"`
	Topic     string            `expr:"topic"`
}

// CompileDecodedKey is Compile for a plan that decodes keys: key is the
// decoded key (KeyEnv) instead of the key's bytes as a string.
func CompileDecodedKey(src string) (*Program, error) { return compile(src, true) }

// decodedKey is r's decoded key as KeyEnv holds it.
func decodedKey(r *record.Record) any {
	d := r.Note.DecodedOrNil()
	if d == nil || d.Key == nil {
		return nil
	}
	return record.ParseValue(d.Key)
}

// matchDecodedKey runs a program of CompileDecodedKey on f.env with r's
// decoded key.
func (f *Filter) matchDecodedKey(r *record.Record) (bool, error) {
	env := KeyEnv{Value: f.env.Value, Headers: f.env.Headers, Timestamp: f.env.Timestamp, Partition: f.env.Partition, Offset: f.env.Offset, Topic: f.env.Topic}
	if f.prog.usesKey {
		env.Key = decodedKey(r)
	}
	return f.m.match(&env, env.Value)
}
