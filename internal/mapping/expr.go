package mapping

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/replay-tool/replay/internal/filter"
)

// Expr is a compiled set expression: the filter's language over the same
// record (filter.Env), with exact decimal arithmetic. It is immutable and
// safe for concurrent use.
type Expr struct {
	src  string
	prog *vm.Program
	// usesValue and usesHeaders say whether the expression reads value or
	// headers.
	usesValue, usesHeaders bool
}

// String returns the expression as written.
func (e *Expr) String() string { return e.src }

// operators maps the operators evaluated exactly to their functions.
var operators = map[string]string{
	"+": "$add", "-": "$sub", "*": "$mul", "/": "$div", "%": "$mod",
	"==": "$eq", "!=": "$ne", "<": "$lt", "<=": "$le", ">": "$gt", ">=": "$ge",
	"in": "$in",
}

// disabled are the builtins a mapping does not offer: they compute in
// binary floating point (float, abs, ceil, floor, mean, median, sum, max,
// min, int) or read the clock (now), so the same record would not always
// map to the same, exact value.
var disabled = []string{"float", "abs", "ceil", "floor", "mean", "median", "sum", "max", "min", "int", "now"}

// CompileExpr compiles src, a set expression. Its errors are
// *filter.Error, positioned in the expression: a syntax error, an unknown
// name, a builtin a mapping does not offer, a format_time without a zone
// or with an unknown one.
func CompileExpr(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &filter.Error{Line: 1, Column: 1, Msg: "empty expression"}
	}
	p := &patcher{src: []rune(src)}
	opts := []expr.Option{
		expr.Env(filter.Env{}),
		expr.Timezone("UTC"),
		expr.Function("round", roundFn, new(func(any, any) any)),
		expr.Function("decimal", decimalFn, new(func(any) any)),
		expr.Function("type", typeFn, new(func(any) string)),
		expr.Function("format_time", formatTimeFn, new(func(time.Time, string, string) string)),
		expr.Function("$divround", divRoundFn, new(func(any, any, any) any)),
		expr.Function("$neg", func(a ...any) (any, error) { return negate(a[0]) }, new(func(any) any)),
		expr.Patch(p),
	}
	for op, name := range operators {
		switch {
		case op == "in":
			opts = append(opts, expr.Function(name, func(a ...any) (any, error) { return in(a[0], a[1]) }, new(func(any, any) bool)))
		case strings.ContainsAny(op, "=<>"):
			opts = append(opts, expr.Function(name, func(a ...any) (any, error) { return compare(op, a[0], a[1]) }, new(func(any, any) bool)))
		default:
			opts = append(opts, expr.Function(name, func(a ...any) (any, error) { return binary(op, a[0], a[1]) }, new(func(any, any) any)))
		}
	}
	for _, b := range disabled {
		opts = append(opts, expr.DisableBuiltin(b))
	}
	prog, err := expr.Compile(src, opts...)
	if p.err != nil {
		return nil, p.err
	}
	if err != nil {
		return nil, compileError(err)
	}
	return &Expr{src: src, prog: prog, usesValue: p.value, usesHeaders: p.headers}, nil
}

func compileError(err error) error {
	fe := &file.Error{Line: 1, Message: err.Error()}
	errors.As(err, &fe)
	msg := fe.Message
	if name, ok := strings.CutPrefix(msg, "unknown name "); ok {
		if slices.Contains(disabled, name) {
			msg = fmt.Sprintf("%s() is not offered in a mapping: it computes in binary floating point or reads the clock; numbers are exact decimals (round(x, places), decimal(text))", name)
		} else {
			msg += fmt.Sprintf(" (an expression sees %s; a field of the value is value.%s)", strings.Join(filter.Names, ", "), name)
		}
	}
	return &filter.Error{Line: max(fe.Line, 1), Column: fe.Column + 1, Msg: msg}
}

// eval evaluates e over env, on a virtual machine of its own.
func (e *Expr) eval(env *filter.Env) (any, error) {
	out, err := vm.Run(e.prog, env)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, errors.New(fe.Message)
		}
		return nil, err
	}
	return out, nil
}

// patcher rewrites an expression so that it computes exactly: float
// literals become *Dec constants parsed from their text, arithmetic and
// comparisons call the exact operators, round(a / b, n) divides and rounds
// in one step, and a field of a missing field reads as nil (value.a.b is
// value?.a?.b), as in the filter. It checks the time helpers' zones.
type patcher struct {
	src            []rune
	value, headers bool
	err            error
	// chains are the optional chains the patcher added.
	chains map[*ast.ChainNode]bool
}

func (p *patcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		switch n.Value {
		case "value":
			p.value = true
		case "headers":
			p.headers = true
		}
	case *ast.FloatNode:
		p.float(node, n)
	case *ast.BinaryNode:
		if name, ok := operators[n.Operator]; ok {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: []ast.Node{n.Left, n.Right}})
		}
	case *ast.UnaryNode:
		if n.Operator == "-" {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "$neg"}, Arguments: []ast.Node{n.Node}})
		}
	case *ast.CallNode:
		p.call(node, n)
	case *ast.MemberNode:
		n.Node = p.unchain(n.Node)
		if !valueRooted(n.Node) || n.Method {
			return
		}
		n.Optional = true
		chain := &ast.ChainNode{Node: n}
		if p.chains == nil {
			p.chains = map[*ast.ChainNode]bool{}
		}
		p.chains[chain] = true
		ast.Patch(node, chain)
	}
}

// float replaces a float literal with its exact *Dec, parsed from the
// literal's text (expr parses it as a float64).
func (p *patcher) float(node *ast.Node, n *ast.FloatNode) {
	loc := n.Location()
	text := ""
	if loc.From >= 0 && loc.To <= len(p.src) && loc.From < loc.To {
		text = strings.ReplaceAll(string(p.src[loc.From:loc.To]), "_", "")
	}
	d, err := ParseDec(text)
	if err != nil {
		p.fail(n, "the number %s: %v", text, err)
		return
	}
	d.Text = ""
	ast.Patch(node, &ast.ConstantNode{Value: d})
}

// call rewrites round(a / b, n) and checks format_time's zone.
func (p *patcher) call(node *ast.Node, n *ast.CallNode) {
	id, ok := n.Callee.(*ast.IdentifierNode)
	if !ok {
		return
	}
	switch id.Value {
	case "round":
		if len(n.Arguments) != 2 {
			return
		}
		if div, ok := n.Arguments[0].(*ast.CallNode); ok {
			if c, ok := div.Callee.(*ast.IdentifierNode); ok && c.Value == "$div" {
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "$divround"}, Arguments: []ast.Node{div.Arguments[0], div.Arguments[1], n.Arguments[1]}})
			}
		}
	case "format_time":
		if len(n.Arguments) == 2 {
			p.fail(n, "%v", errNoZone)
			return
		}
		if len(n.Arguments) == 3 {
			if z, ok := n.Arguments[2].(*ast.StringNode); ok {
				if _, err := loadZone(z.Value); err != nil {
					p.fail(n.Arguments[2], "%v", err)
				}
			}
		}
	}
}

// fail records the first error of the expression at node.
func (p *patcher) fail(node ast.Node, format string, args ...any) {
	if p.err != nil {
		return
	}
	line, col := 1, 1
	for _, r := range p.src[:min(max(node.Location().From, 0), len(p.src))] {
		col++
		if r == '\n' {
			line, col = line+1, 1
		}
	}
	p.err = &filter.Error{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// unchain undoes the chain the patcher added around a member, so that
// only the outermost access is a chain.
func (p *patcher) unchain(n ast.Node) ast.Node {
	if c, ok := n.(*ast.ChainNode); ok && p.chains[c] {
		return c.Node
	}
	return n
}

// valueRooted reports whether an access chain starts at value.
func valueRooted(n ast.Node) bool {
	for {
		switch x := n.(type) {
		case *ast.MemberNode:
			n = x.Node
		case *ast.ChainNode:
			n = x.Node
		case *ast.IdentifierNode:
			return x.Value == "value"
		default:
			return false
		}
	}
}
