// Package filter compiles a plan's filter expression (expr-lang, see
// https://expr-lang.org) and evaluates it over one record. It is pure: no
// I/O, no dependency on the rest of replay, so package plan compiles the
// expression when it validates a plan and the runner evaluates that same
// program.
package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/replay-tool/replay/internal/jsonscan"
)

// Env is what an expression sees of a record.
type Env struct {
	// Key is the record key ("" when the record has none).
	Key string `expr:"key"`
	// Value is the value parsed as JSON (objects as map[string]any, arrays
	// as []any, numbers as json.Number, which expressions see as int or
	// float64), or the raw string when it is not JSON; nil for a tombstone.
	// A field that is missing or null reads as nil (value.a.b is nil when a
	// is missing); a field of a value that is not an object is an error.
	Value any `expr:"value"`
	// Headers maps each header key to its last value.
	Headers   map[string]string `expr:"headers"`
	Timestamp time.Time         `expr:"timestamp"`
	Partition int               `expr:"partition"`
	Offset    int               `expr:"offset"`
	Topic     string            `expr:"topic"`
}

// Names are the variables an expression may use.
var Names = []string{"key", "value", "headers", "timestamp", "partition", "offset", "topic"}

// Program is a compiled filter expression. It is immutable and safe for
// concurrent use; evaluate it with a Filter.
type Program struct {
	src  string
	prog *vm.Program
	// UsesValue and UsesHeaders say whether the expression reads value or
	// headers, so that callers build them only when needed.
	UsesValue, UsesHeaders bool
	// fields are the top-level fields of the value the expression reads,
	// when it reads nothing else of it (valueFields): the filter then looks
	// them up instead of decoding the whole value. nil: decode it.
	fields []string
	// decodedKey: compiled by CompileDecodedKey, the expression runs on a
	// KeyEnv; usesKey says whether it reads key.
	decodedKey, usesKey bool
}

// Error is a compile error, positioned in the expression (1-based).
type Error struct {
	Line, Column int
	Msg          string
}

func (e *Error) Error() string {
	if e.Line == 1 {
		return fmt.Sprintf("column %d: %s", e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// numFunc converts JSON numbers where an expression uses a value (see
// numberPatcher); its name cannot be written in an expression.
const numFunc = "$num"

// Compile compiles src, an expression that must return a bool. Its errors
// are *Error.
func Compile(src string) (*Program, error) { return compile(src, false) }

// compile compiles src over Env, or over KeyEnv when decodedKey (its key
// then reads like value: a field of it is nil when missing, numbers are
// numbers).
func compile(src string, decodedKey bool) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Line: 1, Column: 1, Msg: "empty expression"}
	}
	var env any = Env{}
	dynamic := map[string]bool{"value": true}
	if decodedKey {
		env, dynamic["key"] = KeyEnv{}, true
	}
	uses := &usesVisitor{}
	np := &numberPatcher{dynamic: dynamic, chains: map[*ast.ChainNode]bool{}, src: []rune(src)}
	prog, err := expr.Compile(src,
		expr.Env(env),
		expr.AsBool(),
		expr.Timezone("UTC"), // date("2026-11-03 10:00") means the same instant on every machine
		expr.Function(numFunc, func(args ...any) (any, error) { return number(args[0]) }, new(func(any) any)),
		expr.Patch(uses),
		expr.Patch(np),
	)
	if np.err != nil {
		return nil, np.err
	}
	if err != nil {
		return nil, compileError(err)
	}
	return &Program{src: src, prog: prog, UsesValue: uses.value, UsesHeaders: uses.headers, fields: valueFields(src),
		decodedKey: decodedKey, usesKey: uses.key}, nil
}

func compileError(err error) error {
	fe := &file.Error{Line: 1, Message: err.Error()} // not positioned: the whole expression
	errors.As(err, &fe)
	msg := fe.Message
	if name, ok := strings.CutPrefix(msg, "unknown name "); ok {
		msg += fmt.Sprintf(" (a filter sees %s; a field of the value is value.%s)", strings.Join(Names, ", "), name)
	}
	if strings.HasPrefix(msg, "expected bool") {
		msg += " (a filter is true to write the record, false to leave it out)"
	}
	if _, lit, ok := strings.Cut(msg, `invalid integer literal: strconv.ParseInt: parsing "`); ok && strings.HasSuffix(msg, "value out of range") {
		lit, _, _ = strings.Cut(lit, `"`)
		msg = fmt.Sprintf("the integer %s is beyond the 64-bit integers a filter compares: compare the field's text instead, e.g. value.id.String() == %q", lit, lit)
	}
	return &Error{Line: max(fe.Line, 1), Column: fe.Column + 1, Msg: msg}
}

// String returns the expression as written.
func (p *Program) String() string { return p.src }

// match runs the program on env (an *Env, or a *KeyEnv for a program of
// CompileDecodedKey), whose value is value. An expression that fails on it
// (a field of a value that is not JSON, a result that is not a bool)
// returns an error that names the reason on one line.
func (f *Filter) match(env, value any) (bool, error) {
	out, err := f.vm.Run(f.prog.prog, env)
	if err != nil {
		msg := err.Error()
		var fe *file.Error
		if errors.As(err, &fe) {
			msg = fe.Message
		}
		if t, ok := strings.CutPrefix(msg, "invalid operation: bool("); ok {
			msg = fmt.Sprintf("the expression returned %s, not a bool", strings.TrimSuffix(t, ")"))
		}
		if _, raw := value.(string); raw && f.prog.UsesValue {
			if msg == "invalid operation: int(string)" { // expr reading a field of a string
				msg = "it has no fields"
			}
			msg = "the value is not JSON: " + msg
		}
		return false, errors.New(msg)
	}
	ok, isBool := out.(bool)
	if !isBool {
		return false, fmt.Errorf("the expression returned %T, not a bool", out)
	}
	return ok, nil
}

// usesVisitor records which record parts an expression reads.
type usesVisitor struct{ value, headers, key bool }

func (u *usesVisitor) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok {
		switch id.Value {
		case "value":
			u.value = true
		case "headers":
			u.headers = true
		case "key":
			u.key = true
		}
	}
}

// numberPatcher adapts accesses to the value, so that a field read
// behaves as a data engineer expects of JSON:
//   - a field of a missing field, or of null (a tombstone), is nil rather
//     than an error: value.a.b reads as value?.a?.b. A field of a value that
//     is not an object (a string that is not JSON) is still an error;
//   - JSON numbers are numbers: the value is decoded once with json.Number
//     (the key template needs the number as written), and wherever an
//     expression uses a part of it (value, value.a.b, value.items[0], # or
//     .qty inside a predicate) the result goes through $num, which turns a
//     json.Number into an int (or a float64) and the json.Numbers of an
//     array into numbers, without changing the value.
//
// Only outermost accesses are wrapped: the walk is post-order, so a node
// first unwraps its child and then wraps itself.
type numberPatcher struct {
	chains map[*ast.ChainNode]bool // the chains the patcher added
	// dynamic are the variables of JSON: value, and key when decoded.
	dynamic map[string]bool
	src     []rune // the expression
	// err is the first number literal a float64 does not hold as written.
	err *Error
}

func (p *numberPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.FloatNode:
		loc := n.Location()
		if p.err != nil || loc.From < 0 || loc.To > len(p.src) || loc.From >= loc.To {
			return
		}
		text := strings.ReplaceAll(string(p.src[loc.From:loc.To]), "_", "")
		if _, err := convert(json.Number(text)); err != nil {
			before := string(p.src[:loc.From])
			line, col := 1+strings.Count(before, "\n"), len([]rune(before[strings.LastIndex(before, "\n")+1:]))+1
			p.err = &Error{Line: line, Column: col, Msg: fmt.Sprintf("the number %s is not one a filter compares exactly: it compares as the float64 %s; compare a field's text instead, e.g. value.amount.String() == %q",
				text, strconv.FormatFloat(n.Value, 'g', -1, 64), text)}
		}
	case *ast.IdentifierNode:
		if p.dynamic[n.Value] {
			wrap(node)
		}
	case *ast.PointerNode:
		wrap(node)
	case *ast.MemberNode:
		n.Node = p.unwrap(n.Node)
		if p.typedRoot(n.Node) || n.Method {
			return
		}
		n.Optional = true
		chain := &ast.ChainNode{Node: n}
		p.chains[chain] = true
		ast.Patch(node, chain)
		wrap(node)
	case *ast.ChainNode:
		n.Node = p.unwrap(n.Node)
		if !p.typedRoot(n.Node) {
			wrap(node)
		}
	case *ast.CallNode:
		n.Callee = p.unwrap(n.Callee) // value.id.String(): a method of json.Number
	case *ast.SliceNode:
		n.Node = p.unwrap(n.Node)
		wrap(node)
	}
}

// typedRoot reports whether an access chain starts at a variable of a
// static type (headers, key, ...): those need no conversion and keep their
// type for the checker.
func (p *numberPatcher) typedRoot(n ast.Node) bool {
	for {
		switch x := n.(type) {
		case *ast.MemberNode:
			n = x.Node
		case *ast.ChainNode:
			n = x.Node
		case *ast.IdentifierNode:
			return !p.dynamic[x.Value] && x.Value != numFunc
		default:
			return false
		}
	}
}

func wrap(node *ast.Node) {
	ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: numFunc}, Arguments: []ast.Node{*node}})
}

// unwrap undoes wrap and the chain the patcher added around a member.
func (p *numberPatcher) unwrap(n ast.Node) ast.Node {
	if c, ok := n.(*ast.CallNode); ok {
		if id, ok := c.Callee.(*ast.IdentifierNode); ok && id.Value == numFunc && len(c.Arguments) == 1 {
			n = c.Arguments[0]
		}
	}
	if c, ok := n.(*ast.ChainNode); ok && p.chains[c] {
		n = c.Node
	}
	return n
}

// number converts a json.Number to an int when it is a whole number that
// fits, else to a float64 when that holds the number as written; an
// array's elements likewise (a copy: the value is shared with the key
// template). A number a float64 would change (more digits than it keeps,
// beyond its range) is an error: compared rounded, it would pass or drop
// the record silently. Anything else is returned as is.
func number(x any) (any, error) {
	switch v := x.(type) {
	case json.Number:
		return convert(v)
	case []any:
		var out []any
		for i, e := range v {
			if n, ok := e.(json.Number); ok {
				if out == nil {
					out = slices.Clone(v)
				}
				c, err := convert(n)
				if err != nil {
					return nil, err
				}
				out[i] = c
			}
		}
		if out != nil {
			return out, nil
		}
	}
	return x, nil
}

func convert(n json.Number) (any, error) {
	if i, err := n.Int64(); err == nil {
		return int(i), nil
	}
	if f, err := n.Float64(); err == nil && jsonscan.FloatHolds(string(n), f, 64) {
		return f, nil
	}
	return nil, fmt.Errorf("the number %s is not one a filter compares exactly (a 64-bit integer, or a decimal a float64 holds as written); compare its text instead: value.<field>.String() == \"%s\"", n, n)
}
