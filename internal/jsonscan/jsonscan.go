// Package jsonscan decides in one pass, without recursion, whether bytes
// are one JSON document (RFC 8259, what encoding/json.Valid accepts) and
// what kind of value it is, under options that add the rules of the
// places a document goes: one line of a JSONL file, a bounded depth,
// PostgreSQL's jsonb. A deeply nested document costs no stack.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the kind of a document's top-level value.
type Kind uint8

// The kinds of value; Invalid is the kind of bytes that are not a
// document under the options.
const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	True
	False
	Null
)

// Options are the rules a document must follow beyond RFC 8259. The zero
// value adds none: Scan then agrees with Valid.
type Options struct {
	// OneLine: the white space between tokens (and around the document)
	// is spaces and tabs only, no line break.
	OneLine bool
	// Trimmed: no white space before or after the document.
	Trimmed bool
	// UTF8: strings hold valid UTF-8 only (the rest of a document is
	// ASCII).
	UTF8 bool
	// NoLineSeparators: strings hold no U+2028 or U+2029 (JavaScript line
	// terminators, which some JSONL readers split on). It implies UTF8.
	NoLineSeparators bool
	// Unicode: strings hold valid UTF-8 and no \u escape of a lone UTF-16
	// surrogate, so encoding/json decodes them without putting U+FFFD in
	// their place. It implies UTF8.
	Unicode bool
	// MaxDepth is the deepest nesting accepted: every object and array
	// counts, an empty one too. Below 0 the depth is not limited; 0 is
	// Valid's limit.
	MaxDepth int
	// Jsonb: PostgreSQL's jsonb takes the document as it is: no \u0000
	// escape (jsonb strings hold no NUL), no \u escape of a lone UTF-16
	// surrogate, every number within the range of numeric (which jsonb
	// stores numbers in).
	Jsonb bool
	// SignedZero: no number is a negative zero (-0, -0.0, -0e3): numeric,
	// and so jsonb, stores it as 0, which drops a float's sign.
	SignedZero bool
}

// EncodingJSONDepth is the deepest nesting encoding/json accepts.
const EncodingJSONDepth = 10000

// largeDocument is the size above which Valid limits the depth.
const largeDocument = 64 << 10

// Valid reports whether v is one JSON document (RFC 8259). A document
// over 64 KiB may nest at most EncodingJSONDepth levels, as
// encoding/json.Valid accepts; a smaller one any depth. It is
// Options{}.Scan(v) != Invalid.
func Valid(v []byte) bool { return Options{}.Scan(v) != Invalid }

// ValidUnicode reports whether v is one JSON document, as Valid, whose
// strings encoding/json decodes as written (Options.Unicode).
func ValidUnicode(v []byte) bool { return Options{Unicode: true}.Scan(v) != Invalid }

// Scan returns the kind of v's top-level value, or Invalid when v is not
// one JSON document that follows o.
func (o Options) Scan(v []byte) Kind {
	n := len(v)
	if n == 0 || o.Trimmed && (isSpace(v[0], false) || isSpace(v[n-1], false)) {
		return Invalid
	}
	o.UTF8 = o.UTF8 || o.NoLineSeparators || o.Unicode
	maxDepth, line := o.maxDepth(n), o.OneLine
	var (
		i     int
		small [32]byte
		stack = small[:0] // the closing bracket of each open object or array
	)
value:
	i = skip(v, i, line)
	if i == n {
		return Invalid
	}
	switch c := v[i]; c {
	case '"':
		i = str(v, i+1, o)
	case '{', '[':
		if len(stack) == maxDepth { // an empty one counts too
			return Invalid
		}
		if i = skip(v, i+1, line); i < n && v[i] == c+2 { // '}' and ']' follow '{' and '[' by 2
			i++
			break
		}
		if stack = append(stack, c+2); c == '[' {
			goto value
		}
		goto key
	case 't', 'f', 'n':
		i = literal(v, i)
	default:
		start := i
		if i = number(v, i); i > 0 && (o.Jsonb && !numericFits(v[start:i]) || o.SignedZero && negativeZero(v[start:i])) {
			return Invalid
		}
	}
	if i < 0 {
		return Invalid
	}
after: // a value: what follows it closes an object or array or starts the next member
	i = skip(v, i, line)
	if len(stack) == 0 {
		if i < n {
			return Invalid
		}
		return kindOf(v)
	}
	if i == n {
		return Invalid
	}
	switch c := v[i]; {
	case c == stack[len(stack)-1]:
		stack = stack[:len(stack)-1]
		i++
		goto after
	case c != ',':
		return Invalid
	}
	i++
	if stack[len(stack)-1] == ']' {
		goto value
	}
key:
	i = skip(v, i, line)
	if i == n || v[i] != '"' {
		return Invalid
	}
	if i = str(v, i+1, o); i < 0 {
		return Invalid
	}
	if i = skip(v, i, line); i == n || v[i] != ':' {
		return Invalid
	}
	i++
	goto value
}

// maxDepth is the deepest nesting o accepts in a document of n bytes.
func (o Options) maxDepth(n int) int {
	switch {
	case o.MaxDepth == 0 && n > largeDocument:
		return EncodingJSONDepth
	case o.MaxDepth <= 0:
		return n // deeper than the bytes allow
	}
	return o.MaxDepth
}

// literal scans the true, false or null at v[i] and returns the index
// after it, -1 when it is not there.
func literal(v []byte, i int) int {
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(v)-i >= len(lit) && string(v[i:i+len(lit)]) == lit {
			return i + len(lit)
		}
	}
	return -1
}

// kindOf is the kind of the document v's value.
func kindOf(v []byte) Kind {
	i := 0
	for isSpace(v[i], false) {
		i++
	}
	if k := strings.IndexByte(`{["tfn`, v[i]); k >= 0 {
		return [...]Kind{Object, Array, String, True, False, Null}[k]
	}
	return Number
}

// skip returns the index of the first byte at or after i that is not
// white space (see isSpace).
func skip(v []byte, i int, oneLine bool) int {
	for i < len(v) && isSpace(v[i], oneLine) {
		i++
	}
	return i
}

// isSpace reports whether c is white space JSON allows between tokens:
// a space, a tab, or (unless oneLine) a line break. A printable byte
// costs one comparison.
func isSpace(c byte, oneLine bool) bool {
	return c <= ' ' && (c == ' ' || c == '\t' || !oneLine && (c == '\n' || c == '\r'))
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainMask has the high bit of each of x's 8 bytes that is below 0x20, a
// quote, a backslash or 0x80 or more: the bytes a JSON string cannot carry
// as they are. The lowest bit set is exact (a borrow runs only upwards
// from a byte that set it).
func plainMask(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((x-lsb*0x20)&^x | (q-lsb)&^q | (b-lsb)&^b | x) & msb
}

// PlainRun returns how many of s's leading bytes a JSON string carries as
// they are (printable ASCII other than quote and backslash), counted in
// whole 8-byte words up to the first word that holds another byte, from
// which the count is exact.
func PlainRun(s []byte) int {
	i := 0
	for i+8 <= len(s) {
		if m := plainMask(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// str scans the rest of a string whose opening quote is before v[i] and
// returns the index after its closing quote, -1 for a control character,
// a bad escape, no closing quote, or what the options refuse. Plain ASCII
// is checked 8 bytes at a time (PlainRun).
func str(v []byte, i int, o Options) int {
	n := len(v)
	i += PlainRun(v[i:])
	for i < n {
		switch c := v[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i = escape(v, i, o); i < 0 {
				return -1
			}
		case c < 0x20:
			return -1
		case c < utf8.RuneSelf:
			// A plain byte: the plain ASCII after it is skipped 8 bytes
			// at a time (text of other scripts does not pay for the
			// check).
			i += 1 + PlainRun(v[i+1:])
		case c >= 0xc2 && c < 0xe0 && i+1 < n && v[i+1]&0xc0 == 0x80:
			i += 2 // a two-byte sequence (Latin, Greek, Cyrillic): UTF-8
		case !o.UTF8:
			i++
		default:
			r, size := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && size == 1 || o.NoLineSeparators && (r == '\u2028' || r == '\u2029') {
				return -1
			}
			i += size
		}
	}
	return -1
}

// escape scans the escape at v[i] (a backslash) and returns the index
// after it, -1 when it is not one or o refuses it.
func escape(v []byte, i int, o Options) int {
	if i+1 >= len(v) {
		return -1
	}
	switch v[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		u := hex4(v, i+2)
		switch {
		case u < 0:
			return -1
		case !o.Jsonb && !o.Unicode:
			return i + 6
		case u == 0 && o.Jsonb, u >= 0xdc00 && u <= 0xdfff: // a NUL, a low surrogate alone
			return -1
		case u >= 0xd800 && u <= 0xdbff: // a high surrogate: its low one follows
			if lo := hex4(v, i+8); i+8 > len(v) || v[i+6] != '\\' || v[i+7] != 'u' || lo < 0xdc00 || lo > 0xdfff {
				return -1
			}
			return i + 12
		}
		return i + 6
	}
	return -1
}

// hex4 is the value of the four hex digits at v[i], -1 when they are not.
func hex4(v []byte, i int) int {
	if i < 0 || i+4 > len(v) {
		return -1
	}
	n := 0
	for _, c := range v[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		n = n<<4 | int(c)
	}
	return n
}

// number scans a number at v[i] (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
// and returns the index after it, -1 when there is none.
func number(v []byte, i int) int {
	n := len(v)
	if v[i] == '-' {
		i++
	}
	switch {
	case i < n && v[i] == '0':
		i++
	case i < n && v[i] >= '1' && v[i] <= '9':
		i = digits(v, i+1)
	default:
		return -1
	}
	if i < n && v[i] == '.' {
		if i+1 == n || !isDigit(v[i+1]) {
			return -1
		}
		i = digits(v, i+2)
	}
	if i < n && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < n && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if i == n || !isDigit(v[i]) {
			return -1
		}
		i = digits(v, i+1)
	}
	return i
}

// digits returns the index of the first byte at or after i that is not a
// digit.
func digits(v []byte, i int) int {
	for i < len(v) && isDigit(v[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// negativeZero reports whether the JSON number n is a zero with a minus
// sign.
func negativeZero(n []byte) bool {
	if n[0] != '-' {
		return false
	}
	for _, c := range n[1:] {
		switch c {
		case 'e', 'E':
			return true
		case '0', '.':
		default:
			return false
		}
	}
	return true
}

// FloatHolds reports whether f, a float of bits (32 or 64), is the
// decimal number s as written: the shortest decimal that reads back as f
// is the same number (1.50 and 1.5 are; 0.1000000000000000055 is not, nor
// 1e400, which reads back as infinity).
func FloatHolds(s string, f float64, bits int) bool {
	short := strconv.FormatFloat(f, 'g', -1, bits)
	if short == s {
		return true
	}
	x, xok := new(big.Rat).SetString(s)
	y, yok := new(big.Rat).SetString(short)
	return xok && yok && x.Cmp(y) == 0
}

// The limits of PostgreSQL's numeric: at most 131072 digits before the
// decimal point and a display scale of at most 16383
// (NUMERIC_WEIGHT_MAX, NUMERIC_DSCALE_MAX).
const (
	numericMaxIntDigits = 131072
	numericMaxScale     = 16383
)

// numericFits reports whether numeric takes the JSON number n: its digits
// before the decimal point (from the first non-zero digit, with the
// exponent) and its scale (fraction digits as written less the exponent)
// within numeric's limits.
func numericFits(n []byte) bool {
	e := bytes.IndexAny(n, "eE")
	if e < 0 && len(n) <= numericMaxScale {
		return true // too few digits to reach either limit
	}
	if n[0] == '-' {
		n, e = n[1:], e-1
	}
	mant, exp := n, 0
	if e >= 0 {
		mant = n[:e]
		digits := n[e+1:]
		neg := digits[0] == '-'
		if digits[0] == '-' || digits[0] == '+' {
			digits = digits[1:]
		}
		for _, c := range digits {
			exp = exp*10 + int(c-'0')
			if exp > 1<<24 {
				return false // far beyond either limit
			}
		}
		if neg {
			exp = -exp
		}
	}
	intPart, frac := mant, []byte(nil)
	if dot := bytes.IndexByte(mant, '.'); dot >= 0 {
		intPart, frac = mant[:dot], mant[dot+1:]
	}
	if len(frac)-exp > numericMaxScale {
		return false
	}
	// The position of the first non-zero digit: > 0 in the integer part,
	// <= 0 in the fraction (0.05: -1); none: the number is zero.
	pos, nonzero := 0, false
	if t := bytes.TrimLeft(intPart, "0"); len(t) > 0 {
		pos, nonzero = len(t), true
	} else if t := bytes.TrimLeft(frac, "0"); len(t) > 0 {
		pos, nonzero = -(len(frac) - len(t)), true
	}
	return !nonzero || pos+exp <= numericMaxIntDigits
}
