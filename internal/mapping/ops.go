package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// num returns x as a *Dec when it is a number: a *Dec, a Go integer (a
// literal, partition, offset, len(...)) or a JSON number. ok is false for
// anything else; err says why a number cannot be used exactly (a float64,
// a JSON number out of range).
func num(x any) (d *Dec, ok bool, err error) {
	switch v := x.(type) {
	case *Dec:
		return v, true, nil
	case Dec: // expr dereferences a pointer in places (a ?? b)
		return &v, true, nil
	case int:
		return IntDec(int64(v)), true, nil
	case int64:
		return IntDec(v), true, nil
	case int32:
		return IntDec(int64(v)), true, nil
	case json.Number:
		d, err := ParseDec(string(v))
		return d, true, err
	case float64, float32:
		return nil, true, fmt.Errorf("the binary floating-point number %v is not exact: compute with the value's numbers and literals, which are decimals", v)
	}
	return nil, false, nil
}

// typeFn is expr's type with a mapping's numbers named as the rules for
// numbers name them, "int" or "decimal", instead of the Go type holding
// them.
func typeFn(a ...any) (any, error) {
	if d, ok, err := num(a[0]); ok {
		if err != nil {
			return nil, err
		}
		if d.isInt() {
			return "int", nil
		}
		return "decimal", nil
	}
	return builtin.Type(a[0]), nil
}

// nums is num of a and b: the first error of the two.
func nums(a, b any) (x, y *Dec, xok, yok bool, err error) {
	if x, xok, err = num(a); err == nil {
		y, yok, err = num(b)
	}
	return x, y, xok, yok, err
}

// binary runs the arithmetic operator op (+ - * / %) on a and b: numbers
// exactly (arith), + also on two strings.
func binary(op string, a, b any) (any, error) {
	x, y, xok, yok, err := nums(a, b)
	if err != nil {
		return nil, err
	}
	if xok && yok {
		return arith(op, x, y)
	}
	if op == "+" {
		if s, ok := a.(string); ok {
			if t, ok := b.(string); ok {
				return s + t, nil
			}
		}
	}
	return nil, fmt.Errorf("invalid operation: %s %s %s", typeName(a), op, typeName(b))
}

// typeName names x's type for a message: JSON's names for JSON's types.
func typeName(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case *Dec, Dec, int, int64, json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case time.Time:
		return "time"
	}
	return fmt.Sprintf("%T", x)
}

// compare runs the comparison op (== != < <= > >=) on a and b: numbers by
// their exact values (1.50 == 1.5), strings and times in their order,
// anything else by equality only.
func compare(op string, a, b any) (bool, error) {
	x, y, xok, yok, err := nums(a, b)
	if err != nil {
		return false, err
	}
	c := 0
	switch {
	case xok && yok:
		c = cmpDec(x, y)
	case op == "==" || op == "!=":
		if xok || yok { // a number and something else
			return op == "!=", nil
		}
		return runtime.Equal(a, b) == (op == "=="), nil
	default:
		s, sok := a.(string)
		t, tok := b.(string)
		u, uok := a.(time.Time)
		w, wok := b.(time.Time)
		switch {
		case sok && tok:
			c = strings.Compare(s, t)
		case uok && wok:
			c = u.Compare(w)
		default:
			return false, fmt.Errorf("invalid operation: %s %s %s", typeName(a), op, typeName(b))
		}
	}
	switch op {
	case "==":
		return c == 0, nil
	case "!=":
		return c != 0, nil
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// in reports whether a is an element of the list b (numbers by their exact
// values, as ==) or a key of the object b.
func in(a, b any) (bool, error) {
	switch c := b.(type) {
	case []any:
		for _, e := range c {
			if eq, err := compare("==", a, e); err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case map[string]any:
		k, ok := a.(string)
		if !ok {
			return false, fmt.Errorf("invalid operation: %s in object (an object's keys are strings)", typeName(a))
		}
		_, found := c[k]
		return found, nil
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("invalid operation: %s in %s", typeName(a), typeName(b))
}

// negate returns -a for a number.
func negate(a any) (any, error) {
	x, ok, err := num(a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("invalid operation: -%s", typeName(a))
	}
	if x.isInt() {
		return intOp("-", IntDec(0), x)
	}
	return &Dec{U: new(big.Int).Neg(x.U), Scale: x.Scale}, nil
}

// places reads round's places argument: a whole number, 0 to maxScale.
func places(a any) (int, error) {
	d, ok, err := num(a)
	if err != nil || !ok || !d.isInt() || !d.U.IsInt64() {
		return 0, fmt.Errorf("round: places must be a whole number, got %v", a)
	}
	if n := d.U.Int64(); n < 0 || n > maxScale {
		return 0, fmt.Errorf("round: places must be 0 to %d, got %d", maxScale, n)
	}
	return int(d.U.Int64()), nil
}

// roundFn is round(x, places): x rounded half away from zero.
func roundFn(args ...any) (any, error) {
	x, ok, err := num(args[0])
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("round: want a number, got %s", typeName(args[0]))
	}
	n, err := places(args[1])
	if err != nil {
		return nil, err
	}
	return roundDec(x, n)
}

// divRoundFn is round(a / b, places), computed as one operation: the
// quotient, exact or not, rounded half away from zero.
func divRoundFn(args ...any) (any, error) {
	x, y, xok, yok, err := nums(args[0], args[1])
	if err != nil {
		return nil, err
	}
	if !xok || !yok {
		return nil, fmt.Errorf("invalid operation: %s / %s", typeName(args[0]), typeName(args[1]))
	}
	n, err := places(args[2])
	if err != nil {
		return nil, err
	}
	return divRound(x, y, n)
}

// decimalFn is decimal(x): a number written as text ("19.99"), or a
// number, as an exact decimal.
func decimalFn(args ...any) (any, error) {
	if s, ok := args[0].(string); ok {
		d, err := ParseDec(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("decimal: %w", err)
		}
		d.Text = ""
		return d, nil
	}
	d, ok, err := num(args[0])
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("decimal: want a number or its text, got %s", typeName(args[0]))
	}
	return d, nil
}

// layouts are the names format_time takes for Go's common layouts.
var layouts = map[string]string{
	"RFC3339": time.RFC3339, "RFC3339Nano": time.RFC3339Nano, "DateTime": time.DateTime, "DateOnly": time.DateOnly, "TimeOnly": time.TimeOnly,
}

// errNoZone says why a time helper needs its zone argument.
var errNoZone = errors.New(`format_time needs a zone as its third argument, e.g. format_time(timestamp, "2006-01-02 15:04", "Europe/Berlin") or "UTC": a wall-clock time without its zone names a different instant in each place`)

// formatTimeFn is format_time(t, layout, zone): t in zone, written by the
// Go layout (or RFC3339, RFC3339Nano, DateTime, DateOnly, TimeOnly).
func formatTimeFn(args ...any) (any, error) {
	t, ok := args[0].(time.Time)
	if !ok {
		return nil, fmt.Errorf("format_time: want a time (timestamp), got %s", typeName(args[0]))
	}
	layout, _ := args[1].(string)
	if l, ok := layouts[layout]; ok {
		layout = l
	}
	zone, _ := args[2].(string)
	loc, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	return t.In(loc).Format(layout), nil
}

// loadZone loads an IANA zone name ("Europe/Berlin", "UTC"). "" and
// "Local" are refused: they mean the machine's zone, which differs
// between hosts.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("format_time: zone %q is the machine's zone: name one, e.g. \"UTC\" or \"Europe/Berlin\"", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("format_time: unknown zone %q: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", name)
	}
	return loc, nil
}
