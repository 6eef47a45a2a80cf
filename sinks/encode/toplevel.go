package encode

import (
	"bytes"
	"unsafe"

	"github.com/tidwall/gjson"
)

// findTop finds the first member key of the top level of doc, a valid
// JSON document, in one pass that skips the other members' values without
// parsing them: the value's span, and found false when there is no such
// member. ok is false when doc is no object, or a key before the match
// holds an escape (gjson's own matching then decides).
func findTop(doc []byte, key string) (raw []byte, found, ok bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false, false
	}
	i = skipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		kend := skipString(doc, i)
		k := doc[i+1 : kend-1]
		if bytes.IndexByte(k, '\\') >= 0 {
			return nil, false, false
		}
		v := skipSpace(doc, skipSpace(doc, kend)+1) // past ':'
		vend := skipValue(doc, v)
		if string(k) == key {
			return doc[v:vend], true, true
		}
		i = skipSpace(doc, vend)
		if i < len(doc) && doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
	}
	return nil, false, true
}

// SimplePath reports whether the gjson path p names one member as it is:
// ASCII letters, digits, '_' and '-' only (no '.', wildcard, modifier,
// query or escape).
func SimplePath(p string) bool {
	if p == "" {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// topText is the text of raw, a value of a top-level field key of doc,
// as Cells.Text says it: false for null. With alias, a string or number
// is returned pointing into raw.
func topText(doc, raw []byte, key string, alias bool) (string, bool) {
	text := func(b []byte) string {
		if alias && len(b) > 0 {
			return unsafe.String(&b[0], len(b))
		}
		return string(b)
	}
	switch raw[0] {
	case 'n':
		return "", false
	case 't':
		return "true", true
	case 'f':
		return "false", true
	case '"':
		if s := raw[1 : len(raw)-1]; bytes.IndexByte(s, '\\') < 0 {
			return text(s), true
		}
		return gjson.GetBytes(doc, key).Str, true // gjson's unescaping
	}
	return text(raw), true // a number as written, an object or array as JSON
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at d[i].
func skipString(d []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(d[j:], '"')
		if k < 0 {
			return len(d)
		}
		j += k
		n := 0
		for b := j - 1; b > i && d[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index after the value that starts at d[i].
func skipValue(d []byte, i int) int {
	if i >= len(d) {
		return i
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				i = skipString(d, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(d)
	}
	for i < len(d) {
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
