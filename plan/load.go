package plan

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a plan, located in its file.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"column"`
	Field   string `json:"field"`
	Message string `json:"message"`
	// Warning marks a problem that does not make the plan invalid.
	Warning bool `json:"warning,omitempty"`
}

func (p Problem) String() string {
	msg := p.Message
	if p.Field != "" {
		msg = p.Field + ": " + msg
	}
	if p.Warning {
		msg = "warning: " + msg
	}
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, msg)
	}
	return p.File + ": " + msg
}

// InvalidError is returned by Load and Validate when a plan has problems.
// It lists every problem found, errors and warnings, in file order.
type InvalidError struct {
	Problems []Problem
	// UnsetEnv lists the variables left unset (LoadOptions.AllowUnsetEnv).
	UnsetEnv []string
}

func (e *InvalidError) Error() string {
	var lines []string
	for _, p := range e.Errors() {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

// Errors returns the problems that make the plan invalid (not warnings).
func (e *InvalidError) Errors() []Problem { return problemsOf(e.Problems, false) }

// problemsOf returns the warnings of ps (warning), or its errors.
func problemsOf(ps []Problem, warning bool) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Warning == warning {
			out = append(out, p)
		}
	}
	return out
}

// LoadOptions changes how a plan is loaded.
type LoadOptions struct {
	// LookupEnv resolves ${VAR}; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Now is the clock for relative times and "in the future" checks; default time.Now.
	Now func() time.Time
	// AllowUnsetEnv makes an unset ${VAR} no problem, for offline checks
	// (validate, test): it expands to nothing, the problems of the fields
	// holding it are dropped, and Plan.UnsetEnv lists the variables. Such
	// a plan must not be run.
	AllowUnsetEnv bool
	// Sinks are the sink types a plan may use (registry.Catalog). Required.
	Sinks SinkCatalog
}

// Load reads, decodes, defaults and validates the plan in file. Every problem
// is reported at once in an *InvalidError; I/O errors are returned as is.
// Warnings alone do not fail: they are available from Plan.Warnings.
func Load(file string, opts LoadOptions) (*Plan, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	if len(data) > MaxPlanBytes {
		return nil, fmt.Errorf("read plan: %s is larger than %d bytes: a plan is a few kilobytes of YAML; is it the right file?", file, MaxPlanBytes)
	}
	return Parse(file, data, opts)
}

// MaxPlanBytes bounds the size of a plan file Load reads (1 MiB).
const MaxPlanBytes = 1 << 20

func isEmptyScalar(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}

// Parse is Load for a plan already in memory; file names it in messages.
func Parse(file string, data []byte, opts LoadOptions) (*Plan, error) {
	if opts.Sinks == nil {
		return nil, errors.New("plan: LoadOptions.Sinks is nil: pass the sink types a plan may use (registry.Catalog())")
	}
	if err := opts.Sinks.check(); err != nil {
		return nil, err
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Plan{File: file, sinks: opts.Sinks, pos: map[string]Pos{}, fromEnv: map[string]bool{}, emptyEnv: map[string]string{}, envRaw: map[string]string{}, bad: map[string]bool{}}
	d := &decoder{Plan: p, opts: opts, ref: envRef, unset: map[string][]string{}}
	// "{" and "}" are flow indicators in YAML, so `sasl: {password: ${PW}}`
	// would not parse: references become the same-length $(PW) (or the
	// first other form the plan does not contain) before parsing.
	for _, alt := range envRefAlternates {
		if open, close := alt[:2], alt[2:]; !bytes.Contains(data, []byte(open)) {
			data = envRef.ReplaceAll(data, []byte(open+"$1"+close))
			d.ref = regexp.MustCompile(regexp.QuoteMeta(open) + envName + regexp.QuoteMeta(close))
			break
		}
	}
	// yaml.v3 reads the first document only: a second one (not empty: a
	// trailing --- with nothing or comments after it) would be ignored silently.
	var doc, next yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&doc)
	if err == nil {
		err = dec.Decode(&next)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &InvalidError{Problems: []Problem{yamlSyntaxProblem(file, data, err)}}
	}
	if len(next.Content) > 0 && !isEmptyScalar(next.Content[0]) {
		return nil, &InvalidError{Problems: []Problem{{File: file, Line: next.Content[0].Line, Col: next.Content[0].Column,
			Message: "a second YAML document (after ---): a plan file holds one plan; move this one to a file of its own, or remove the ---"}}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &InvalidError{Problems: []Problem{{File: file, Line: 1, Col: 1, Message: "empty plan: see the plan reference in docs/plan.md"}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		// Nothing else can be checked: do not bury this under "missing" problems.
		return nil, &InvalidError{Problems: []Problem{{File: file, Line: root.Line, Col: root.Column,
			Message: fmt.Sprintf("a plan is a mapping (key: value lines), got %s", describe(root))}}}
	}
	d.expandEnv(root, "")
	d.walk(root, reflect.ValueOf(p).Elem(), "")
	p.applyDefaults()
	p.problems = append(p.problems, p.validate(opts.Now())...)
	p.problems, p.unsetEnv = dropUnset(p.problems, d.unset)
	slices.SortStableFunc(p.problems, func(a, b Problem) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col)) })
	// Messages do not quote secrets; in case one does, it is redacted here.
	p.problems = NewRedactor(p.Secrets()...).Problems(p.problems)
	if slices.ContainsFunc(p.problems, func(pr Problem) bool { return !pr.Warning }) {
		return nil, &InvalidError{Problems: p.problems, UnsetEnv: p.unsetEnv}
	}
	return p, nil
}

// UnsetEnv lists the ${VAR}s of the plan that were unset when it was
// loaded with LoadOptions.AllowUnsetEnv, sorted; nil otherwise.
func (p *Plan) UnsetEnv() []string { return p.unsetEnv }

// Warnings returns the problems that do not make the plan invalid.
func (p *Plan) Warnings() []Problem { return problemsOf(p.problems, true) }

// decoder decodes a plan into its Plan, recording there where each field
// is, which came from the environment, and the fields already reported
// (bad), which validation does not report again.
type decoder struct {
	*Plan
	opts  LoadOptions
	ref   *regexp.Regexp      // an environment reference as it appears after parsing
	unset map[string][]string // fields holding an unset variable -> its names
}

func (d *decoder) problem(n *yaml.Node, field, format string, args ...any) {
	d.problemAt(n.Line, n.Column, field, format, args...)
}

func (d *decoder) problemAt(line, col int, field, format string, args ...any) {
	d.bad[field] = true
	d.problems = append(d.problems, Problem{File: d.File, Line: line, Col: col, Field: field, Message: fmt.Sprintf(format, args...)})
}

var (
	envRef = regexp.MustCompile(`\$\{` + envName + `\}`)
	// envRefAlternates are same-length forms of ${VAR} that YAML reads as
	// plain text, tried in order: their opening and closing.
	envRefAlternates = []string{"$()", "$<>", "$~~", "$^^"}
)

// envName is the name of a variable in an environment reference.
const envName = `([A-Za-z_][A-Za-z0-9_]*)`

// expandEnv replaces ${VAR} in every scalar value from the environment.
// A missing variable is a problem; an empty one is recorded in emptyEnv
// for a warning (${OUT_DIR}/x.jsonl becomes /x.jsonl).
func (d *decoder) expandEnv(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.expandEnv(n.Content[i+1], join(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.expandEnv(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.ScalarNode:
		if !d.ref.MatchString(n.Value) {
			return
		}
		d.fromEnv[path] = true
		d.envRaw[path] = d.ref.ReplaceAllString(n.Value, "$${$1}")
		n.Value = d.ref.ReplaceAllStringFunc(n.Value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := d.opts.LookupEnv(name)
			switch {
			case !ok && d.opts.AllowUnsetEnv:
				d.unset[path] = append(d.unset[path], name)
			case !ok:
				d.problem(n, path, "environment variable %s is not set: export it before running replay", name)
			case v == "":
				d.emptyEnv[path] = name
			}
			return v
		})
		if n.Style != 0 { // quoted, block or explicitly tagged: stays a string
			return
		}
		n.Tag = "" // let YAML resolve the expanded text (a number, a bool, ...)
	}
}

// dropUnset drops the problems of the fields holding an unset variable (or
// inside them: brokers[0]), and returns the variables' names, sorted.
func dropUnset(problems []Problem, unset map[string][]string) ([]Problem, []string) {
	if len(unset) == 0 {
		return problems, nil
	}
	var names []string
	for _, ns := range unset {
		names = append(names, ns...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// A warning about a whole section (no throttle) is not known to hold
	// while one of its fields is unset: throttle: {records_per_second:
	// ${RATE}} is a throttle.
	return slices.DeleteFunc(problems, func(pr Problem) bool {
		for path := range unset {
			if within(pr.Field, path) || pr.Warning && strings.HasPrefix(path, pr.Field+".") {
				return true
			}
		}
		return false
	}), names
}

// within reports whether field is path or a field inside it (path.x, path[0]).
func within(field, path string) bool {
	return field == path || strings.HasPrefix(field, path+".") || strings.HasPrefix(field, path+"[")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// walk decodes n into v, reporting unknown keys, duplicate keys and wrong
// types at their line and column, and going on to find the next problem.
func (d *decoder) walk(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.pos[path] = Pos{n.Line, n.Column}
	}
	if t := n.Tag; t == "!!binary" || t != "" && !strings.HasPrefix(t, "!!") {
		// !!binary is base64 a reviewer cannot read; a local tag is ignored.
		d.problem(n, path, "tag %s: a plan holds plain values, read as written: remove the tag", t)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		d.leaf(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Tag == "!!null" {
			return
		}
		elem := reflect.New(v.Type().Elem())
		d.walk(n, elem.Elem(), path)
		v.Set(elem)
	case reflect.Struct:
		d.walkStruct(n, v, path)
	case reflect.Map:
		d.walkMap(n, v, path)
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && d.fromEnv[path] && v.Type().Elem().Kind() == reflect.String {
			// brokers: ${KAFKA_BROKERS}: its users split the list on commas.
			v.Set(reflect.ValueOf([]string{n.Value}).Convert(v.Type()))
			return
		}
		if n.Kind != yaml.SequenceNode {
			hint := ""
			if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && v.Type().Elem().Kind() == reflect.String && !d.secret(path) {
				hint = fmt.Sprintf(": write it as a list, e.g. [%s]", strconv.Quote(n.Value))
			}
			d.problem(n, path, "want a list, got %s%s", d.describe(n, path), hint)
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.walk(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		d.leaf(n, v, path)
	}
}

func (d *decoder) leaf(n *yaml.Node, v reflect.Value, path string) {
	if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && !reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		d.problem(n, path, "want %s, got %s", kindName(v.Type()), d.describe(n, path))
		return
	}
	if t := v.Type(); n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && (t == reflect.TypeFor[Duration]() || t == reflect.TypeFor[ByteSize]()) {
		// YAML leaves the zero value, which means something (max_elapsed:
		// ~ would be 0s, fail at once, not the default 5m).
		d.problem(n, path, "empty: give a value, or drop the line for the default")
		return
	}
	if k := v.Kind(); reflect.Int <= k && k <= reflect.Uint64 && n.ShortTag() == "!!float" && !reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		d.problem(n, path, "want a whole number, got %s", d.describe(n, path)) // YAML would cut 10.7 to 10
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		var ne *nodeError
		switch {
		case errors.As(err, new(*yaml.TypeError)):
			d.problem(n, path, "want %s, got %s%s", kindName(v.Type()), d.describe(n, path), quoteHint(n, v.Type()))
		case errors.As(err, &ne):
			d.problemAt(ne.line, ne.col, path, "%s", ne.msg)
		default:
			d.problem(n, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
}

// quoteHint explains a quoted value that would decode without its quotes
// (batch_size: "1000").
func quoteHint(n *yaml.Node, t reflect.Type) string {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		return ""
	}
	plain := yaml.Node{Kind: yaml.ScalarNode, Value: n.Value}
	if plain.Decode(reflect.New(t).Interface()) != nil {
		return ""
	}
	return " (the quotes make it a string: remove them)"
}

// nodeError is an error at a node inside the value being decoded, reported
// at that node's line and column.
type nodeError struct {
	line, col int
	msg       string
}

func (e *nodeError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func errorAt(n *yaml.Node, format string, args ...any) error {
	return &nodeError{line: n.Line, col: n.Column, msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) walkStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "want a mapping (key: value lines), got %s", d.describe(n, path))
		return
	}
	if s, ok := v.Addr().Interface().(*Sink); ok {
		d.walkSink(n, s, path)
		return
	}
	d.walkFields(n, path, yamlFields(v), nil)
}

func (d *decoder) walkMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "want a mapping, got %s", d.describe(n, path))
		return
	}
	m := reflect.MakeMap(v.Type())
	seen, keys := map[string]int{}, map[string]int{} // by text, by value
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := join(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			d.problem(k, fp, "duplicate key (first set at line %d): keep one", line)
			continue
		}
		seen[k.Value] = k.Line
		if path == "window.offsets" && k.Value == "all" {
			// One range for every partition: Window.OffsetsAll.
			d.Window.OffsetsAll = &OffsetRange{}
			d.walk(val, reflect.ValueOf(d.Window.OffsetsAll).Elem(), fp)
			continue
		}
		kv := reflect.New(v.Type().Key()).Elem()
		if err := mapKey(k, kv, path); err != nil {
			d.problem(k, fp, "%s", err)
			d.bad[path] = true // the map is reported: it is not missing
			continue
		}
		if line, dup := keys[fmt.Sprint(kv)]; dup { // "1" and ' 1' are one key
			d.problem(k, fp, "duplicate key (first set at line %d): keep one", line)
			continue
		}
		keys[fmt.Sprint(kv)] = k.Line
		ev := reflect.New(v.Type().Elem()).Elem()
		d.walk(val, ev, fp)
		m.SetMapIndex(kv, ev)
	}
	v.Set(m)
}

// decimalKey is a number key as a person writes it: decimal digits, no
// leading zero, no exponent or point (YAML would read 010 as 8 and 1.0 or
// 1e0 as 1, so that two keys of one partition could pass as different).
var decimalKey = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// mapKey decodes the key k of the map at path into kv. A number key is
// decimal (decimalKey) and may be quoted ("0": is partition 0, as a
// person means it).
func mapKey(k *yaml.Node, kv reflect.Value, path string) error {
	switch kv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if k.Kind != yaml.ScalarNode || !decimalKey.MatchString(strings.TrimSpace(k.Value)) {
			break
		}
		n, err := strconv.ParseInt(strings.TrimSpace(k.Value), 10, kv.Type().Bits())
		if err == nil {
			kv.SetInt(n)
			return nil
		}
		if errors.Is(err, strconv.ErrRange) && n > 0 {
			what := "numbers"
			if path == "window.offsets" {
				what = "partition numbers"
			}
			return fmt.Errorf("%s is too large: %s go up to %d", k.Value, what, n)
		}
	default:
		if k.Decode(kv.Addr().Interface()) == nil {
			return nil
		}
	}
	what := kindName(kv.Type())
	if path == "window.offsets" {
		what = "a partition number (0, 1, ...) or all"
	}
	return fmt.Errorf("key %q: want %s", k.Value, what)
}

// secretPath matches the plan's own settings that hold credentials (a sink
// type's are those its descriptor marks).
var secretPath = regexp.MustCompile(`(^|\.)(sasl|password|bearer_token)(\.|\[|$)`)

// describe is describe(n), except that a value from the environment in a
// setting that holds credentials is named by its ${VAR}, never quoted.
func (d *decoder) describe(n *yaml.Node, path string) string {
	if raw, ok := d.envRaw[path]; ok && n.Kind == yaml.ScalarNode && d.secret(path) {
		return "the value of " + raw
	}
	return describe(n)
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}
