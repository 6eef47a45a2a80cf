// Package mapping evaluates a plan's mapping: ordered steps over a
// record's JSON value that set a field from an expression, rename one or
// drop one. It is exact by construction: a JSON number keeps its text
// until an operation needs it, arithmetic is decimal (math/big), and an
// operation whose exact result cannot be kept (a 64-bit integer overflow,
// a quotient that is not a finite decimal, more than MaxDigits digits) is
// the record's error, never a rounded value. It is pure: no I/O, no
// dependency on the plan, so package plan compiles the expressions when it
// validates a plan and the pipeline runs the same steps.
package mapping

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/internal/record"
)

// Path is a field inside the value, as its object keys from the top
// (value.customer.id is {"customer", "id"}).
type Path []string

// String returns the path as a plan writes it, value.a.b.
func (p Path) String() string { return "value." + strings.Join(p, ".") }

// ParsePath parses a path written in a plan: dot-separated object keys,
// with value. optional (customer.id and value.customer.id are the same
// field). A key cannot contain a dot; an empty key, a key with spaces
// around it, or the whole value (value) is an error saying so.
func ParsePath(s string) (Path, error) {
	rest := strings.TrimPrefix(s, "value.")
	if s == "value" || s == "" {
		return nil, fmt.Errorf("%q is not a field of the value: name one, e.g. value.customer or customer", s)
	}
	keys := strings.Split(rest, ".")
	for _, k := range keys {
		switch {
		case k == "":
			return nil, fmt.Errorf("%q has an empty key: write the keys separated by single dots, e.g. value.customer.id", s)
		case strings.TrimSpace(k) != k:
			return nil, fmt.Errorf("%q has a key with spaces around it (%q)", s, k)
		}
	}
	return Path(keys), nil
}

// Kind is the kind of a step.
type Kind int

// The kinds of step.
const (
	// Set writes the result of an expression at a path, creating the
	// objects on the way.
	Set Kind = iota + 1
	// Rename moves the field at a path to another path.
	Rename
	// Drop removes the field at a path.
	Drop
)

func (k Kind) String() string {
	switch k {
	case Set:
		return "set"
	case Rename:
		return "rename"
	}
	return "drop"
}

// Op is one operation of a step: for Set, Expr written at To; for Rename,
// From moved to To; for Drop, From removed.
type Op struct {
	From, To Path
	Expr     *Expr
}

// Step is one step of a mapping: its kind and operations, run in order.
type Step struct {
	Kind Kind
	Ops  []Op
}

// Mapping is a compiled mapping: its steps, in order. It is immutable and
// safe for concurrent use.
type Mapping struct{ steps []Step }

// New returns the mapping of steps.
func New(steps []Step) *Mapping { return &Mapping{steps: steps} }

// StepError is the failure of a mapping step on one record: which step
// (1-based), the path it was writing or reading, and why.
type StepError struct {
	Step int
	Kind Kind
	Path Path
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("mapping step %d (%s %s): %v", e.Step, e.Kind, e.Path, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// ValueError is a value a mapping cannot run over: not JSON, or JSON but
// not an object.
type ValueError struct{ Err error }

func (e *ValueError) Error() string { return "mapping: " + e.Err.Error() }

func (e *ValueError) Unwrap() error { return e.Err }

// IsMappingError reports whether err, a record's error, is the failure of
// a mapping (a *StepError or a *ValueError in its chain).
func IsMappingError(err error) bool {
	var se *StepError
	var ve *ValueError
	return errors.As(err, &se) || errors.As(err, &ve)
}

// Apply maps r's value in place: it maps the value the pipeline reads as
// JSON (record.Record.JSONValue: the decoded value of a record the decode
// stage decoded, else r.Value); r.Value becomes the mapped JSON (compact,
// the value's keys in their order, new keys after them) and r.Note.Value
// its parse (record.ParseValue), for the key template and the sinks; the
// bytes as read stay in r.Note.Original, the decoded value in
// r.Note.Decoded (for a dead letter). A tombstone is left as it is. A
// value that is not a JSON object, or a step that fails on it, returns r's
// *record.Error wrapping a *StepError (or a *ValueError: the value is not
// a JSON object), and leaves r as it was.
func (m *Mapping) Apply(r *record.Record) error {
	if r.Value == nil {
		return nil
	}
	v := r.JSONValue()
	doc, err := parseDoc(v)
	var dup *duplicateKey
	switch {
	case errors.As(err, &dup), errors.Is(err, errNotUnicode):
		return record.NewError(r, &ValueError{err})
	case len(v) == 0:
		return record.NewError(r, &ValueError{errors.New("the value is empty (0 bytes), not JSON")})
	case err != nil && !utf8.Valid(v):
		return record.NewError(r, &ValueError{fmt.Errorf("the value is not JSON: it holds bytes that are not UTF-8 (byte 0x%02x at %d)", v[badByte(v)], badByte(v))})
	case err != nil:
		return record.NewError(r, &ValueError{fmt.Errorf("the value is not JSON: %v", err)})
	}
	root, ok := doc.(*object)
	if !ok {
		return record.NewError(r, &ValueError{fmt.Errorf("the value is a JSON %s, not an object: a mapping's paths name fields of an object", typeName(doc))})
	}
	for i, s := range m.steps {
		if err := step(r, root, s); err != nil {
			var se *StepError
			if errors.As(err, &se) {
				se.Step = i + 1
			}
			return record.NewError(r, err)
		}
	}
	mapped := appendDoc(nil, root)
	n := record.Note{Original: r.Value, Value: record.ParseValue(mapped), Parsed: true}
	if r.Note != nil {
		n.Reason, n.Decoded = r.Note.Reason, r.Note.Decoded
		if r.Note.Original != nil {
			n.Original = r.Note.Original
		}
	}
	r.Note = &n
	r.Value = mapped
	return nil
}

// step runs one step over root.
func step(r *record.Record, root *object, s Step) error {
	for _, op := range s.Ops {
		var err error
		at := op.From
		switch s.Kind {
		case Set:
			at = op.To
			err = set(r, root, op)
		case Rename:
			err = rename(root, op.From, op.To)
		case Drop:
			err = drop(root, op.From)
		}
		if err != nil {
			return &StepError{Kind: s.Kind, Path: at, Err: err}
		}
	}
	return nil
}

// set evaluates op.Expr over r with root as the value and writes the
// result at op.To.
func set(r *record.Record, root *object, op Op) error {
	vs := views{}
	env := filter.Env{Key: string(r.Key), Timestamp: r.Time, Partition: int(r.Partition), Offset: int(r.Offset), Topic: r.Topic}
	if op.Expr.usesValue {
		env.Value = vs.view(root, "value")
	}
	if op.Expr.usesHeaders {
		env.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			env.Headers[h.Key] = string(h.Value)
		}
	}
	out, err := op.Expr.eval(&env)
	if err != nil {
		return err
	}
	v, err := vs.fromExpr(out)
	if err != nil {
		return err
	}
	return put(root, op.To, v)
}

// parent returns the object holding path's last key, creating the
// objects on the way when create is set; nil when one is missing. A key
// on the way that holds something else than an object is an error.
func parent(root *object, path Path, create bool) (*object, error) {
	o := root
	for i, k := range path[:len(path)-1] {
		v, ok := o.get(k)
		if !ok || (v == nil && create) {
			if !create {
				return nil, nil
			}
			c := newObject()
			o.set(k, c)
			o = c
			continue
		}
		c, isObj := v.(*object)
		if !isObj {
			if v == nil {
				return nil, nil
			}
			return nil, fmt.Errorf("%s is a %s, not an object", path[:i+1], typeName(v))
		}
		o = c
	}
	return o, nil
}

// put writes v at path, creating the objects on the way (a null on the
// way becomes an object).
func put(root *object, path Path, v any) error {
	o, err := parent(root, path, true)
	if err != nil {
		return err
	}
	o.set(path[len(path)-1], v)
	return nil
}

// rename moves the field at from to to. A missing from (or a null or
// missing object on its way) is no change; a to that already holds a
// field is an error: a rename never overwrites.
func rename(root *object, from, to Path) error {
	o, err := parent(root, from, false)
	if err != nil || o == nil {
		return err
	}
	v, ok := o.get(from[len(from)-1])
	if !ok {
		return nil
	}
	if d, _ := parent(root, to, false); d != nil {
		if _, exists := d.get(to[len(to)-1]); exists {
			return fmt.Errorf("%s already holds a field: a rename does not overwrite one (drop it first)", to)
		}
	}
	o.del(from[len(from)-1])
	return put(root, to, v)
}

// drop removes the field at path; a missing one is no change.
func drop(root *object, path Path) error {
	o, err := parent(root, path, false)
	if err != nil || o == nil {
		return err
	}
	o.del(path[len(path)-1])
	return nil
}

// badByte is the index of the first byte of v that is not valid UTF-8.
func badByte(v []byte) int {
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRune(v[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return 0
}
