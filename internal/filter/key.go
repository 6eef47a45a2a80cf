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

// keyEnv is f.env as a program of CompileDecodedKey sees it: with r's
// decoded key, when the program reads it.
func (f *Filter) keyEnv(r *record.Record) *KeyEnv {
	env := &KeyEnv{Value: f.env.Value, Headers: f.env.Headers, Timestamp: f.env.Timestamp, Partition: f.env.Partition, Offset: f.env.Offset, Topic: f.env.Topic}
	if d := r.Note.DecodedOrNil(); f.prog.usesKey && d != nil && d.Key != nil {
		env.Key = record.ParseValue(d.Key)
	}
	return env
}
