package mapping

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// MaxDigits is the most significant digits a decimal result keeps (the
// precision of DECIMAL(38) in PostgreSQL, Parquet, Spark and BigQuery): a
// result that needs more is refused, never rounded.
const MaxDigits = 38

// maxScale bounds the digits after the point a number may have (and the
// exponent of a JSON number a mapping computes with), so that a number
// like 1e999999999 cannot make a step allocate gigabytes.
const maxScale = 1000

// Dec is an exact decimal number, U × 10^-Scale, as a mapping expression
// sees a JSON number or a number literal. A Dec with Scale 0 is an
// integer: integer arithmetic is 64-bit and checked. Text, when set, is
// the number as written in the value (a field copied as it is keeps its
// text); Src names where it was read (value.amount) for messages.
type Dec struct {
	U     *big.Int
	Scale int
	Text  string
	Src   string
}

var bigTen = big.NewInt(10)

// pow10 returns 10^n.
func pow10(n int) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil) }

// ParseDec parses a JSON number (or a number literal) exactly. The result
// keeps text as its Text.
func ParseDec(text string) (*Dec, error) {
	s := text
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxScale || e < -maxScale {
			return nil, fmt.Errorf("%s: its exponent is out of the range a mapping computes with (±%d)", text, maxScale)
		}
		exp, s = e, s[:i]
	}
	scale := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = len(s) - i - 1
		s = s[:i] + s[i+1:]
	}
	u, ok := new(big.Int).SetString(s, 10)
	if !ok || s == "" || strings.HasPrefix(s, "+") {
		return nil, fmt.Errorf("%q is not a number", text)
	}
	scale -= exp
	if scale < 0 {
		u.Mul(u, pow10(-scale))
		scale = 0
	}
	if scale > maxScale {
		return nil, fmt.Errorf("%s has more than %d digits after the point", text, maxScale)
	}
	return &Dec{U: u, Scale: scale, Text: text}, nil
}

// IntDec returns i as an integer Dec.
func IntDec(i int64) *Dec { return &Dec{U: big.NewInt(i)} }

// String returns d as a JSON number: its Text when it has one, else the
// decimal digits with Scale digits after the point, never an exponent. It
// has a value receiver: expr hands a dereferenced Dec to some builtins
// (string(x)).
func (d Dec) String() string {
	if d.Text != "" {
		return d.Text
	}
	return d.plain()
}

// MarshalJSON writes d as its JSON number (String), for toJSON(x).
func (d Dec) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// plain is d's digits with Scale digits after the point.
func (d Dec) plain() string {
	digits := new(big.Int).Abs(d.U).String()
	sign := ""
	if d.U.Sign() < 0 {
		sign = "-"
	}
	if d.Scale == 0 {
		return sign + digits
	}
	if len(digits) <= d.Scale {
		digits = strings.Repeat("0", d.Scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-d.Scale] + "." + digits[len(digits)-d.Scale:]
}

// name is d as a message names an operand: its source and text.
func (d Dec) name() string {
	if d.Src != "" {
		return d.Src + " (" + d.String() + ")"
	}
	return d.String()
}

// isInt reports whether d is an integer (no digits after the point).
func (d *Dec) isInt() bool { return d.Scale == 0 }

// int64 returns d as an int64, or an error saying it is not one.
func (d *Dec) int64() (int64, error) {
	if !d.U.IsInt64() {
		return 0, fmt.Errorf("%s is beyond a 64-bit integer (it would lose digits)", d.name())
	}
	return d.U.Int64(), nil
}

// digits returns the number of significant digits of d's unscaled value.
func digits(u *big.Int) int {
	if u.Sign() == 0 {
		return 1
	}
	return len(new(big.Int).Abs(u).String())
}

// align returns the unscaled values of a and b at their larger scale.
func align(a, b *Dec) (x, y *big.Int, scale int) {
	x, y, scale = a.U, b.U, a.Scale
	switch {
	case a.Scale < b.Scale:
		x, scale = new(big.Int).Mul(a.U, pow10(b.Scale-a.Scale)), b.Scale
	case b.Scale < a.Scale:
		y = new(big.Int).Mul(b.U, pow10(a.Scale-b.Scale))
	}
	return x, y, scale
}

// cmpDec compares a and b: -1, 0 or +1.
func cmpDec(a, b *Dec) int {
	x, y, _ := align(a, b)
	return x.Cmp(y)
}

// result checks that a decimal result keeps every digit: at most MaxDigits
// significant digits.
func result(op string, a, b *Dec, u *big.Int, scale int) (*Dec, error) {
	if n := digits(u); n > MaxDigits {
		return nil, fmt.Errorf("%s %s %s has %d significant digits; a decimal keeps at most %d", a.name(), op, b.name(), n, MaxDigits)
	}
	return &Dec{U: u, Scale: scale}, nil
}

// intOp does a 64-bit integer operation, refusing overflow.
func intOp(op string, a, b *Dec) (*Dec, error) {
	x, err := a.int64()
	if err != nil {
		return nil, err
	}
	y, err := b.int64()
	if err != nil {
		return nil, err
	}
	var r int64
	overflow := false
	switch op {
	case "+":
		r = x + y
		overflow = (y > 0 && r < x) || (y < 0 && r > x)
	case "-":
		r = x - y
		overflow = (y > 0 && r > x) || (y < 0 && r < x)
	case "*":
		r = x * y
		overflow = x != 0 && (r/x != y || (x == -1 && y == math.MinInt64))
	case "%":
		if y == 0 {
			return nil, fmt.Errorf("%s %% %s: division by zero", a.name(), b.name())
		}
		r = x % y
	}
	if overflow {
		return nil, fmt.Errorf("%s %s %s overflows a 64-bit integer", a.name(), op, b.name())
	}
	return IntDec(r), nil
}

// arith computes a op b for op + - * /, exactly: integers in 64 bits,
// decimals to MaxDigits digits (× keeps the sum of the scales), ÷ only
// when the quotient is a finite decimal.
func arith(op string, a, b *Dec) (*Dec, error) {
	if op != "/" && a.isInt() && b.isInt() {
		return intOp(op, a, b)
	}
	switch op {
	case "+", "-":
		x, y, scale := align(a, b)
		if op == "+" {
			return result(op, a, b, new(big.Int).Add(x, y), scale)
		}
		return result(op, a, b, new(big.Int).Sub(x, y), scale)
	case "*":
		return result(op, a, b, new(big.Int).Mul(a.U, b.U), a.Scale+b.Scale)
	case "/":
		return divide(a, b)
	case "%":
		return nil, fmt.Errorf("%s %% %s: %% takes integers", a.name(), b.name())
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// quotient returns a ÷ b as the reduced fraction num/den (den > 0).
func quotient(a, b *Dec) (num, den *big.Int, err error) {
	if b.U.Sign() == 0 {
		return nil, nil, fmt.Errorf("%s / %s: division by zero", a.name(), b.name())
	}
	num = new(big.Int).Mul(a.U, pow10(b.Scale))
	den = new(big.Int).Mul(b.U, pow10(a.Scale))
	if den.Sign() < 0 {
		num.Neg(num)
		den.Neg(den)
	}
	g := new(big.Int).GCD(nil, nil, new(big.Int).Abs(num), den)
	if g.Sign() > 0 {
		num.Quo(num, g)
		den.Quo(den, g)
	}
	return num, den, nil
}

// divide returns a ÷ b when it is a finite decimal (the reduced
// denominator has no prime factor but 2 and 5), at the fewest digits after
// the point that hold it; else it refuses, naming round(a / b, places).
func divide(a, b *Dec) (*Dec, error) {
	num, den, err := quotient(a, b)
	if err != nil {
		return nil, err
	}
	d := new(big.Int).Set(den)
	twos, fives := 0, 0
	two, five := big.NewInt(2), big.NewInt(5)
	m := new(big.Int)
	for d.Cmp(big.NewInt(1)) != 0 {
		switch {
		case m.Mod(d, two).Sign() == 0:
			d.Quo(d, two)
			twos++
		case m.Mod(d, five).Sign() == 0:
			d.Quo(d, five)
			fives++
		default:
			return nil, fmt.Errorf("%s / %s is not a finite decimal; round it explicitly: round(a / b, places)", a.name(), b.name())
		}
	}
	scale := max(twos, fives)
	u := new(big.Int).Mul(num, pow10(scale))
	u.Quo(u, den)
	return result("/", a, b, u, scale)
}

// roundFrac rounds num/den to places digits after the point, half away
// from zero.
func roundFrac(num, den *big.Int, places int) *big.Int {
	n := new(big.Int).Mul(num, pow10(places))
	q, r := new(big.Int).QuoRem(n, den, new(big.Int))
	twice := new(big.Int).Abs(r)
	twice.Lsh(twice, 1)
	if twice.Cmp(den) >= 0 {
		if n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// roundDec rounds d to places (0 to maxScale) digits after the point,
// half away from zero; a d with fewer digits is returned at that scale
// unchanged.
func roundDec(d *Dec, places int) (*Dec, error) {
	u := roundFrac(d.U, pow10(d.Scale), places)
	if n := digits(u); n > MaxDigits {
		return nil, fmt.Errorf("round(%s, %d) has %d significant digits; a decimal keeps at most %d", d.name(), places, n, MaxDigits)
	}
	return &Dec{U: u, Scale: places}, nil
}

// divRound returns a ÷ b rounded to places digits after the point, half
// away from zero: the one division that may round, because it says so.
func divRound(a, b *Dec, places int) (*Dec, error) {
	num, den, err := quotient(a, b)
	if err != nil {
		return nil, err
	}
	return result("/", a, b, roundFrac(num, den, places), places)
}
