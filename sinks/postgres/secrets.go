package postgres

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// scrub hides the DSN's password in err's message (pgx redacts it on a best
// effort basis; a malformed DSN can still be quoted whole by url.Parse).
func (s *Sink) scrub(err error) error {
	if err == nil || len(s.secrets) == 0 {
		return err
	}
	return &scrubbedError{err: err, secrets: s.secrets}
}

type scrubbedError struct {
	err     error
	secrets []string
}

func (e *scrubbedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s), strings.Trim(strconv.Quote(s), `"`)} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}

func (e *scrubbedError) Unwrap() error { return e.err }

var (
	urlPassword = regexp.MustCompile(`^[a-z]+://[^:/?#@]*:(.*)@`)
	kvPassword  = regexp.MustCompile(`(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
)

// dsnSecrets finds the password spellings in dsn without relying on it
// parsing: the raw text and its unescaped form.
func dsnSecrets(dsn string) []string {
	var raw []string
	if m := urlPassword.FindStringSubmatch(dsn); m != nil {
		raw = append(raw, m[1])
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		raw = append(raw, strings.Trim(m[1], "'"))
	}
	if u, err := url.Parse(dsn); err == nil {
		if p, ok := u.User.Password(); ok {
			raw = append(raw, p)
		}
		for k, vs := range u.Query() {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				raw = append(raw, vs...)
			}
		}
	}
	var out []string
	for _, s := range raw {
		if s == "" {
			continue
		}
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
	}
	return out
}
