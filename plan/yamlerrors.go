package plan

// What a plan file's YAML syntax errors say, and the "did you mean" suggestions.

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var yamlLine = regexp.MustCompile(`line (\d+):?\s*`)

// yamlErrors says what yaml.v3's messages need. parser: a message of its
// parser (as opposed to its scanner), reported at a 0-based line (the line
// before the one meant): yamlSyntaxProblem adds one. located: reported at
// the line where the enclosing construct starts (a block mapping, a plain
// scalar), not the line at fault: yamlSyntaxProblem looks for that line
// itself. hint: how to fix the syntax errors people make most.
var yamlErrors = map[string]struct {
	parser, located bool
	hint            string
}{
	"did not find expected <document start>":                       {parser: true},
	"found undefined tag handle":                                   {parser: true},
	"did not find expected node content":                           {parser: true},
	"did not find expected '-' indicator":                          {true, true, "check the indentation of this line: the list above expects another - item here"},
	"did not find expected key":                                    {true, true, "check the indentation of this line: it must line up with the other keys of its mapping (or items of its list)"},
	"did not find expected ',' or ']'":                             {parser: true, hint: "a [ list starting on this line is not closed: add the missing ] (or a comma between items)"},
	"did not find expected ',' or '}'":                             {parser: true, hint: "a { mapping starting on this line is not closed: add the missing } (or a comma between entries)"},
	"found duplicate %YAML directive":                              {parser: true},
	"found incompatible YAML document":                             {parser: true},
	"found duplicate %TAG directive":                               {parser: true},
	"found a tab character that violates indentation":              {located: true},
	"found character that cannot start any token":                  {located: true, hint: "quote a value that starts with @ or `, which YAML reserves"},
	"mapping values are not allowed in this context":               {located: true, hint: "check the indentation, or quote a value that contains \": \""},
	"found a tab character where an indentation space is expected": {located: true},
}

func yamlSyntaxProblem(file string, data []byte, err error) Problem {
	msg, line := yamlMessage(err)
	if line >= 0 {
		if yamlErrors[msg].parser {
			line++
		}
		if yamlErrors[msg].located {
			if l := firstFailingLine(data, msg); l > 0 {
				line = l
			}
		}
	} else {
		line = 1
	}
	lines := bytes.Split(data, []byte("\n"))
	if line <= len(lines) && tabIndented(lines[line-1]) {
		// yaml.v3 says "found character that cannot start any token".
		return Problem{File: file, Line: line, Col: 1, Message: fmt.Sprintf("invalid YAML: line %d is indented with a tab: YAML forbids tabs for indentation, indent with spaces", line)}
	}
	if h := yamlErrors[msg].hint; h != "" {
		msg += ": " + h
	}
	return Problem{File: file, Line: line, Col: 1, Message: "invalid YAML: " + msg}
}

// yamlMessage returns yaml.v3's message of err without its "line N:", and
// N (-1 when it names none).
func yamlMessage(err error) (string, int) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return msg, -1
	}
	line, _ := strconv.Atoi(m[1])
	return strings.Replace(msg, m[0], "", 1), line
}

// tabIndented reports whether a tab is part of line's indentation.
func tabIndented(line []byte) bool {
	indent := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}

// firstFailingLine returns the first line at which the document stops
// parsing with msg (the same message: a cut list fails with another), or 0.
func firstFailingLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 5000 {
		return 0 // not a plan someone writes by hand: keep yaml.v3's line
	}
	n := 0
	for k, l := range lines {
		n += len(l)
		var doc yaml.Node
		if err := yaml.Unmarshal(data[:n], &doc); err != nil {
			if got, _ := yamlMessage(err); got == msg {
				return k + 1
			}
		}
	}
	return 0
}

// Suggest returns the candidate closest to s, if it is close enough to be
// a typo (a third of its letters wrong, plus one, ignoring case) or s is
// part of it ("committed" for read_committed); "" when none is. Candidates
// are tried in order: the first of two equally close wins.
func Suggest(s string, candidates []string) string {
	s = strings.ToLower(s)
	best, bestD := "", len(s)/3+2
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if dd := levenshtein(s, lc); dd < bestD {
			best, bestD = c, dd
		}
	}
	if best != "" || len(s) < 3 {
		return best
	}
	for _, c := range candidates {
		if strings.Contains(strings.ToLower(c), s) {
			return c
		}
	}
	return ""
}

// meant is the hint ` (did you mean "s"?)` for a suggestion s; "" for none.
func meant(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", s)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
