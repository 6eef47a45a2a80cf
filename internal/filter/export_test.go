package filter

// Matcher evaluates a Program on an Env: a Filter without its record.
type Matcher struct{ f *Filter }

// Matcher returns a new Matcher of p.
func (p *Program) Matcher() *Matcher { return &Matcher{New(p)} }

// Match reports whether the record env describes passes the filter.
func (m *Matcher) Match(env *Env) (bool, error) { return m.f.match(env, env.Value) }
