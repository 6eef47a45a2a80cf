package sinks

import (
	"github.com/replay-tool/replay/filter"
)

// recordMeta is what replay learned about a record on its way to a sink.
type recordMeta struct {
	// value is Record.Value parsed as the key template sees it (valid when
	// parsed): the filter parses it once, the key template reuses it.
	value  any
	parsed bool
	// reason says why a dead letter could not be processed ("" otherwise).
	reason string
}

// parsedValue returns the value as the filter and the key template see it,
// parsing it unless the filter already did.
func (r *Record) parsedValue() any {
	if r.meta != nil && r.meta.parsed {
		return r.meta.value
	}
	return templateValue(r.Value)
}

// Filter evaluates a plan's filter over records. It is not safe for
// concurrent use: one per partition goroutine.
type Filter struct {
	prog *filter.Program
	m    *filter.Matcher
	env  filter.Env
}

// NewFilter returns a Filter running prog.
func NewFilter(prog *filter.Program) *Filter {
	return &Filter{prog: prog, m: prog.Matcher()}
}

// Match reports whether r passes the filter. An expression that fails on r
// (it reads a field of a value that is not JSON, say) returns a
// *RecordError: a record that cannot be processed, for on_error. The
// value, when the expression reads it, is parsed once and kept with r for
// the key template.
func (f *Filter) Match(r *Record) (bool, error) {
	f.env = filter.Env{Key: string(r.Key), Timestamp: r.Time, Partition: int(r.Partition), Offset: int(r.Offset), Topic: r.Topic}
	if f.prog.UsesValue {
		if r.meta == nil || !r.meta.parsed {
			r.meta = &recordMeta{value: templateValue(r.Value), parsed: true}
		}
		f.env.Value = r.meta.value
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
	ok, err := f.m.Match(&f.env)
	f.env = filter.Env{} // do not pin the record until the next call
	if err != nil {
		return false, recordError(r, &FilterError{Err: err})
	}
	return ok, nil
}

// FilterError is the failure of a filter expression on one record.
type FilterError struct{ Err error }

func (e *FilterError) Error() string { return "filter: " + e.Err.Error() }

func (e *FilterError) Unwrap() error { return e.Err }
