package jsonscan

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// safe[c] is true for ASCII bytes that need no escaping in a JSON string.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string, escaping as encoding/json does
// without its HTML escaping (", \, control characters, U+2028, U+2029)
// and replacing invalid UTF-8 with U+FFFD. It is the one JSON string
// encoder of the project (the JSONL encoder, the decoders' JSON writer).
func AppendString(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c, r, size := s[i], rune(s[i]), 1
		if c < utf8.RuneSelf && safe[c] {
			// A plain byte: the plain ASCII after it is skipped 8 bytes
			// at a time (text of other scripts does not pay for the check).
			i += 1 + PlainRun(s[i+1:])
			continue
		}
		if c >= utf8.RuneSelf {
			if r, size = utf8.DecodeRune(s[i:]); size > 1 && r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch r {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case utf8.RuneError: // invalid UTF-8
			b = append(b, `\ufffd`...)
		case '\u2028', '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
