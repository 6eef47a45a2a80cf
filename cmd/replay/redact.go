package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync/atomic"

	"github.com/replay-tool/replay/plan"
)

// As a last line of defence (secrets never reach messages in the first
// place), everything the command prints, on stdout, stderr and in the
// report, goes through the redactor of the plan it loaded, which replaces
// the plan's secrets with "xxxxx". A stdout sink's records are left alone.

// redactor holds the redactor of the plan the command loaded; nil until
// then. Log lines are written from the partition goroutines: it is atomic.
type redactor struct{ r atomic.Pointer[plan.Redactor] }

// redact returns b with the secrets replaced. A JSON document (a log line,
// a report, -o json) is redacted inside its strings only, so that a
// numeric secret cannot garble a number and the document stays valid.
func (s *redactor) redact(b []byte) []byte {
	r := s.r.Load()
	if r == nil {
		return b
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		return redactJSONStrings(r, b)
	}
	return []byte(r.String(string(b)))
}

// redactJSONStrings redacts the (escaped) text of every string of the
// valid JSON b; the redactor knows the JSON spellings of each secret.
func redactJSONStrings(r *plan.Redactor, b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			out = append(out, b[i])
			continue
		}
		j := i + 1
		for ; j < len(b) && b[j] != '"'; j++ {
			if b[j] == '\\' {
				j++ // the escaped character cannot end the string
			}
		}
		out = append(out, '"')
		out = append(out, r.String(string(b[i+1:min(j, len(b))]))...)
		out = append(out, '"')
		i = j
	}
	return out
}

// redactWriter redacts every Write to w. Each Write is redacted on its
// own: the command's output and zerolog write whole lines or documents.
type redactWriter struct {
	w io.Writer
	s *redactor
}

func (w redactWriter) Write(b []byte) (int, error) {
	if _, err := w.w.Write(w.s.redact(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
