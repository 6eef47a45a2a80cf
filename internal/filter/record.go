package filter

import (
	"github.com/expr-lang/expr/vm"

	"github.com/replay-tool/replay/internal/record"
)

// Filter evaluates a plan's filter over records. It reuses its virtual
// machine between records, so it is not safe for concurrent use: one per
// partition goroutine.
type Filter struct {
	prog *Program
	vm   vm.VM
	env  Env
}

// New returns a Filter running prog.
func New(prog *Program) *Filter { return &Filter{prog: prog} }

// Match reports whether r passes the filter. An expression that fails on r
// (it reads a field of a value that is not JSON, say) returns a
// *record.Error wrapping an *EvalError: a record that cannot be processed, for
// on_error. The value, when the expression reads it, is parsed once and
// kept with r (record.Note) for the key template.
func (f *Filter) Match(r *record.Record) (bool, error) {
	f.env = Env{Key: string(r.Key), Timestamp: r.Time, Partition: int(r.Partition), Offset: int(r.Offset), Topic: r.Topic}
	if f.prog.UsesValue {
		fast := false
		if f.prog.fields != nil && (r.Note == nil || !r.Note.Parsed) {
			// Only what the expression reads: not kept for the key template.
			f.env.Value, fast = partialValue(r.JSONValue(), f.prog.fields)
		}
		if !fast {
			if r.Note == nil {
				r.Note = &record.Note{}
			}
			if !r.Note.Parsed {
				r.Note.Value, r.Note.Parsed = record.ParseValue(r.JSONValue()), true
			}
			f.env.Value = r.Note.Value
		}
		if r.Value == nil {
			f.env.Value = nil // a tombstone, not an empty string
		}
	}
	if f.prog.UsesHeaders {
		f.env.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			f.env.Headers[h.Key] = string(h.Value)
		}
	}
	var env any = &f.env
	if f.prog.decodedKey {
		env = f.keyEnv(r)
	}
	ok, err := f.match(env, f.env.Value)
	f.env = Env{} // do not pin the record until the next call
	if err != nil {
		return false, record.NewError(r, &EvalError{Err: err})
	}
	return ok, nil
}

// EvalError is the failure of a filter expression on one record.
type EvalError struct{ Err error }

func (e *EvalError) Error() string { return "filter: " + e.Err.Error() }

func (e *EvalError) Unwrap() error { return e.Err }
