package plan

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// columnNameRe is a plain SQL column name; the database sinks fold it to
// lower case, as SQL does.
var columnNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Columns checks cols, the section's columns: every field is one a record
// has; a database sink (db) maps its idempotency key to exactly one column
// (the table's unique key, the target of ON CONFLICT) and names plain SQL
// columns.
func (c *SinkCheck) Columns(cols Columns, db bool) {
	v, f := c.v, c.path("columns")
	if !c.DeadLetter() {
		v.sinkColumns = cols
	}
	keys := 0
	folded := map[string]string{}
	for _, col := range cols {
		cf := f + "." + col.Name
		if _, ok := v.p.pos[cf]; !ok && col.pos.Line > 0 {
			v.p.pos[cf] = col.pos // point problems at the column, not at columns:
		}
		switch fl, err := ParseField(col.Field); {
		case err != nil:
			v.add(cf, "%v", err)
		case fl.Kind == FieldKey:
			keys++
		}
		if !db {
			continue
		}
		if !columnNameRe.MatchString(col.Name) {
			v.add(cf, "%q is not a plain column name (ASCII letters, digits and _, not beginning with a digit)", col.Name)
			continue
		}
		lower := strings.ToLower(col.Name)
		if prev, dup := folded[lower]; dup {
			v.add(cf, "the same column as %s: unquoted SQL names fold to lower case", prev)
		}
		folded[lower] = col.Name
	}
	if !db || len(cols) == 0 {
		return
	}
	switch {
	case keys == 0:
		v.add(f, "no column holds the idempotency key: map one to key, e.g. `id: key` (the table's unique key, the target of ON CONFLICT)")
	case keys > 1:
		v.add(f, "%d columns hold the idempotency key: map key to one column only (the table's unique key)", keys)
	}
}

// SameBrokers reports whether two broker lists name the same addresses, in
// any order and case.
func SameBrokers(a, b []string) bool {
	split := func(l []string) []string {
		out := BrokerList([]string{strings.ToLower(strings.Join(l, ","))})
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(split(a), split(b))
}

var (
	// secretHeaderRe matches the names of headers that carry credentials.
	secretHeaderRe = regexp.MustCompile(`(?i)^(authorization|proxy-authorization|cookie)$|token|secret|passw|api-?key|api_key|signature|credential`)
	// secretQueryRe matches URL query parameters that carry credentials.
	secretQueryRe = regexp.MustCompile(`(?i)^(password|passwd|pwd|token|access_token|auth|api_key|apikey|key|secret|client_secret|sig|signature)$`)
)

// URL checks the http(s) URL of the field name: credentials in it must
// come from the environment, as a DSN's password does.
func (c *SinkCheck) URL(name string) {
	f, ok := c.Sink.field(name)
	if !ok || f.value.String() == "" {
		return // an unset URL is reported as a required field
	}
	v, field, raw := c.v, c.path(name), f.value.String()
	u, err := url.Parse(raw)
	if err != nil {
		v.add(field, "not a URL: %s", urlErrorReason(raw, err))
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		v.add(field, "%q: want an http:// or https:// URL with a host", redactedURL(u))
		return
	}
	w, err := url.Parse(v.asWritten(field, raw))
	if err != nil {
		return // the ${VAR}s make up its structure: nothing literal to check
	}
	if pw, ok := w.User.Password(); ok && pw != "" && !strings.Contains(pw, envPlaceholder) {
		v.add(field, "contains a literal password: take the URL (or its password) from the environment, e.g. url: ${ORDERS_API_URL}, or send credentials in headers from ${VAR}")
	}
	for name, vals := range w.Query() {
		for _, val := range vals {
			if secretQueryRe.MatchString(name) && val != "" && !strings.Contains(val, envPlaceholder) {
				v.add(field, "the query parameter %s carries a literal secret: take the URL from the environment, e.g. url: ${ORDERS_API_URL}, or send credentials in headers from ${VAR}", name)
			}
		}
	}
}
