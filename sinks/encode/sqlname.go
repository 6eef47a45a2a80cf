package encode

import (
	"errors"
	"strings"
)

// QuoteIdent quotes an SQL identifier by the double-quote rule of ANSI SQL,
// PostgreSQL and SQLite: "name", each " doubled. The name is taken as
// written (no case folding).
func QuoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// QuoteTable parses an SQL table name, "name" or "schema.name", and returns
// it quoted (QuoteIdent for each part). Unquoted parts fold to lower case,
// as SQL folds them; "quoted" parts are taken as written. An error says
// what is wrong with the name (an empty part, more than two parts, an
// unterminated quote).
func QuoteTable(name string) (string, error) {
	var parts []string
	for rest := name; ; {
		part, after, err := nextNamePart(rest)
		if err != nil {
			return "", err
		}
		if part == "" || strings.ContainsRune(part, 0) || strings.TrimSpace(part) != part {
			return "", errors.New(`want name or schema.name, each part non-empty ("quoted" to keep case or special characters)`)
		}
		parts = append(parts, QuoteIdent(part))
		rest = after
		if rest == "" {
			break
		}
		if rest[0] != '.' || len(parts) == 2 {
			return "", errors.New(`want name or schema.name ("quoted" to keep case or special characters)`)
		}
		rest = rest[1:]
	}
	return strings.Join(parts, "."), nil
}

// nextNamePart splits the first part off an SQL name: a "quoted" part
// unquoted, or an unquoted one folded to lower case.
func nextNamePart(rest string) (part, after string, err error) {
	if !strings.HasPrefix(rest, `"`) {
		end := strings.IndexAny(rest, `."`)
		if end < 0 {
			end = len(rest)
		}
		return ASCIILower(rest[:end]), rest[end:], nil
	}
	var b strings.Builder
	i := 1
	for ; i < len(rest); i++ {
		if rest[i] == '"' {
			if i+1 < len(rest) && rest[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			break
		}
		b.WriteByte(rest[i])
	}
	if i >= len(rest) {
		return "", "", errors.New("unterminated quoted identifier")
	}
	return b.String(), rest[i+1:], nil
}
