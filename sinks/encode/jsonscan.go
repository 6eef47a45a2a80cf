package encode

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// embeddable reports whether v, written verbatim into a JSONL line, reads
// back as the same bytes: one JSON document (RFC 8259, what
// encoding/json.Valid accepts) with no whitespace before or after it
// (which a JSON reader drops), no raw line break (only spaces and
// tabs separate its tokens), valid UTF-8 throughout and no U+2028 or
// U+2029 (JavaScript line terminators, which some JSONL readers split
// on), nested at most maxDepth levels. It is one pass over v without
// recursion: a deeply nested value costs no stack.
func embeddable(v []byte) bool {
	n := len(v)
	if n == 0 || isBlank(v[0]) || isBlank(v[n-1]) {
		return false
	}
	var (
		i     int
		ok    bool
		small [32]byte
		stack = small[:0] // the closing bracket of each open object or array
	)
value:
	for i < n && isBlank(v[i]) {
		i++
	}
	if i == n {
		return false
	}
	switch v[i] {
	case '{':
		if len(stack) == maxDepth { // an empty one counts too
			return false
		}
		i++
		for i < n && isBlank(v[i]) {
			i++
		}
		if i < n && v[i] == '}' {
			i++
			goto after
		}
		stack = append(stack, '}')
		goto key
	case '[':
		if len(stack) == maxDepth { // an empty one counts too
			return false
		}
		i++
		for i < n && isBlank(v[i]) {
			i++
		}
		if i < n && v[i] == ']' {
			i++
			goto after
		}
		stack = append(stack, ']')
		goto value
	case '"':
		if i, ok = scanString(v, i+1); !ok {
			return false
		}
	case 't':
		if !hasAt(v, i, "true") {
			return false
		}
		i += 4
	case 'f':
		if !hasAt(v, i, "false") {
			return false
		}
		i += 5
	case 'n':
		if !hasAt(v, i, "null") {
			return false
		}
		i += 4
	default:
		if i, ok = scanNumber(v, i); !ok {
			return false
		}
	}
after:
	for i < n && isBlank(v[i]) {
		i++
	}
	if len(stack) == 0 {
		return i == n
	}
	if i == n {
		return false
	}
	switch c := v[i]; {
	case c == ',':
		i++
		if stack[len(stack)-1] == '}' {
			goto key
		}
		goto value
	case c == stack[len(stack)-1]:
		stack = stack[:len(stack)-1]
		i++
		goto after
	}
	return false
key:
	for i < n && isBlank(v[i]) {
		i++
	}
	if i == n || v[i] != '"' {
		return false
	}
	if i, ok = scanString(v, i+1); !ok {
		return false
	}
	for i < n && isBlank(v[i]) {
		i++
	}
	if i == n || v[i] != ':' {
		return false
	}
	i++
	goto value
}

// maxDepth is the deepest nesting embeddable accepts (every object and
// array counts, an empty one too): one below encoding/json's limit of
// 10000, because the line's own object is one more level. A deeper value
// is written as a string, so that every line of a JSONL file parses with
// Go's encoding/json.
const maxDepth = 9999

// isBlank reports whether c is whitespace a one-line JSON document may hold
// between tokens.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func hasAt(v []byte, i int, lit string) bool {
	return len(v)-i >= len(lit) && string(v[i:i+len(lit)]) == lit
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

// plainRun returns how many of s's leading bytes a JSON string carries as
// they are (printable ASCII other than quote and backslash), counted in
// whole 8-byte words up to the first word that holds another byte, from
// which the count is exact.
func plainRun(s []byte) int {
	i := 0
	for i+8 <= len(s) {
		if m := plainMask(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// scanString scans the rest of a JSON string whose opening quote is before
// v[i]: it returns the index after the closing quote, and false for a
// control character, a bad escape, invalid UTF-8, U+2028 or U+2029, or no
// closing quote. Plain ASCII is checked 8 bytes at a time (plainRun).
func scanString(v []byte, i int) (int, bool) {
	n := len(v)
	i += plainRun(v[i:])
	for {
		if i >= n {
			return i, false
		}
		switch c := v[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= n {
				return i, false
			}
			switch v[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > n || !isHex(v[i+2]) || !isHex(v[i+3]) || !isHex(v[i+4]) || !isHex(v[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		case c < utf8.RuneSelf:
			// A plain byte: the plain ASCII after it is skipped 8 bytes
			// at a time (text of other scripts does not pay for the
			// check).
			i += 1 + plainRun(v[i+1:])
		default:
			r, size := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return i, false
			}
			i += size
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber scans a JSON number at v[i] (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
// and returns the index after it.
func scanNumber(v []byte, i int) (int, bool) {
	n := len(v)
	if v[i] == '-' {
		i++
	}
	switch {
	case i < n && v[i] == '0':
		i++
	case i < n && v[i] >= '1' && v[i] <= '9':
		for i++; i < n && isDigit(v[i]); i++ {
		}
	default:
		return i, false
	}
	if i < n && v[i] == '.' {
		i++
		if i == n || !isDigit(v[i]) {
			return i, false
		}
		for i++; i < n && isDigit(v[i]); i++ {
		}
	}
	if i < n && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < n && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if i == n || !isDigit(v[i]) {
			return i, false
		}
		for i++; i < n && isDigit(v[i]); i++ {
		}
	}
	return i, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
