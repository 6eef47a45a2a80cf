package plan

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Redacted is what a secret is replaced with in messages and output.
const Redacted = "xxxxx"

// minSecretLen is the shortest value treated as a secret when redacting:
// replacing a shorter one would garble unrelated text and protect nothing.
const minSecretLen = 4

// Secrets returns the values of the plan's secret settings, as expanded
// from the environment: the source's SASL password, the Schema Registry's
// password or bearer token, and the sink's and the dead-letter sink's (the
// fields their type marks as secret, and what its Secrets finds). The
// command line redacts them from everything it prints.
func (p *Plan) Secrets() []string {
	out := []string{p.Source.SASL.Password, p.Decode.SchemaRegistry.Password, p.Decode.SchemaRegistry.BearerToken}
	out = append(out, p.sectionSecrets("sink", &p.Sink)...)
	if p.DeadLetter != nil {
		out = append(out, p.sectionSecrets("dead_letter", p.DeadLetter)...)
	}
	return secretList(out)
}

// sectionSecrets returns the secrets of the section s at field: the
// values of the fields its type marks as secret, and what its Secrets finds.
func (p *Plan) sectionSecrets(field string, s *Sink) []string {
	var out []string
	d, _ := p.sinks.Lookup(s.Type)
	for _, f := range d.Fields {
		if v, ok := s.field(f.Name); ok && f.Secret && v.value.Kind() == reflect.String {
			out = append(out, v.value.String())
		}
	}
	if d.Secrets != nil {
		out = append(out, d.Secrets(s, func(name string) (string, bool) {
			raw, ok := p.envRaw[field+"."+name]
			return raw, ok
		})...)
	}
	return out
}

// EnvParts returns the values the ${VAR}s of raw, a value as written in a
// plan, took in expanded, the value as loaded: "S3cr3t" for raw
// "Bearer ${TOKEN}" and expanded "Bearer S3cr3t"; nil when expanded is
// not raw with its ${VAR}s replaced.
func EnvParts(raw, expanded string) []string {
	var re strings.Builder
	re.WriteString("^")
	last := 0
	for _, m := range envRef.FindAllStringIndex(raw, -1) {
		re.WriteString(regexp.QuoteMeta(raw[last:m[0]]) + "(.*?)")
		last = m[1]
	}
	re.WriteString(regexp.QuoteMeta(raw[last:]) + "$")
	m := regexp.MustCompile(re.String()).FindStringSubmatch(expanded)
	if m == nil {
		return nil
	}
	return m[1:]
}

// DSNSecrets returns the password of a PostgreSQL DSN (URL or key=value
// form); nil when it holds none.
func DSNSecrets(dsn string) []string {
	pw, _ := dsnPassword(dsn) // "" when none: too short to list
	return secretList([]string{pw})
}

// HeaderSecrets returns the values of the credential headers among
// headers (IsSecretHeader), and the credentials after an auth scheme: the
// token of "Bearer <token>", the password of "Basic <base64>".
func HeaderSecrets(headers map[string]string) []string {
	var out []string
	for name, val := range headers {
		if !IsSecretHeader(name) {
			continue
		}
		out = append(out, val)
		scheme, cred, ok := strings.Cut(strings.TrimSpace(val), " ")
		if !ok {
			continue
		}
		cred = strings.TrimSpace(cred)
		out = append(out, cred)
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil && strings.EqualFold(scheme, "Basic") {
			if _, pw, ok := strings.Cut(string(b), ":"); ok {
				out = append(out, pw)
			}
		}
	}
	return secretList(out)
}

// URLSecrets returns the password in a URL's user info and the values of
// its credential query parameters (token=, api_key=, ...).
func URLSecrets(raw string) []string {
	var out []string
	if u, err := url.Parse(raw); err == nil && raw != "" {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		for name, vals := range u.Query() {
			if secretQueryRe.MatchString(name) {
				out = append(out, vals...)
			}
		}
	} else if m := urlUserinfo.FindStringSubmatch(raw); m != nil {
		if _, pw, ok := strings.Cut(m[1], ":"); ok {
			out = append(out, pw)
		}
	}
	return secretList(out)
}

// IsSecretHeader reports whether an HTTP header of this name carries
// credentials (Authorization, Cookie, X-Api-Key, ...): its value must come
// from the environment and is redacted wherever replay prints.
func IsSecretHeader(name string) bool { return secretHeaderRe.MatchString(name) }

// secretList drops the values too short to redact and duplicates, and adds
// the spellings a secret takes once unescaped from a URL or DSN.
func secretList(in []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if len(s) >= minSecretLen && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range in {
		add(s)
		if u, err := url.PathUnescape(s); err == nil {
			add(u)
		}
		if u, err := url.QueryUnescape(s); err == nil {
			add(u)
		}
	}
	return out
}

// Redactor replaces secrets in text with Redacted. The zero value and a
// nil *Redactor replace nothing. It is safe for concurrent use.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor returns a Redactor for secrets (values shorter than 4
// characters are left alone). Each is also matched as it is spelled
// escaped in a URL, in a Go quoted string (%q) and in a JSON string.
func NewRedactor(secrets ...string) *Redactor {
	var forms []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			forms = append(forms, spellings(s)...)
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// strings.Replacer tries the pairs in argument order at each position:
	// longest first, so that a secret containing another goes whole.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	var pairs []string
	for _, f := range slices.Compact(forms) {
		pairs = append(pairs, f, Redacted)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

func spellings(s string) []string {
	jsonInner := func(html bool) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(s)
		return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:]
	}
	quoted := strconv.Quote(s)
	userinfo := strings.TrimPrefix(url.UserPassword("", s).String(), ":")
	return []string{s, url.QueryEscape(s), url.PathEscape(s), userinfo, quoted[1 : len(quoted)-1], jsonInner(true), jsonInner(false)}
}

// String returns s with every secret replaced by Redacted.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Problems returns ps with every secret in their messages replaced.
func (r *Redactor) Problems(ps []Problem) []Problem {
	if r == nil {
		return ps
	}
	for i := range ps {
		ps[i].Message = r.String(ps[i].Message)
	}
	return ps
}

// urlErrorReason is why url.Parse refused raw, without the URL (it may hold
// credentials) and, with user info in raw, without what the reason quotes.
func urlErrorReason(raw string, err error) string {
	msg := err.Error()
	if ue, ok := errors.AsType[*url.Error](err); ok {
		msg = ue.Err.Error()
	}
	if strings.Contains(raw, "@") {
		msg = quotedRe.ReplaceAllString(msg, "(not shown)")
	}
	return msg
}

var quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactedURL is u for messages: its password and the values of its query
// parameters replaced by Redacted (url.URL.Redacted keeps the query).
func redactedURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		q := c.Query()
		for name := range q {
			q[name] = []string{Redacted}
		}
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
