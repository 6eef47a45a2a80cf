package plan

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// SinkType names a kind of sink: the value of a sink's type field. Each
// driver package declares its own (file.Type, postgres.Type, ...).
type SinkType string

// SinkDescriptor describes one sink type. Each driver declares its own
// (sinks/<driver>, Descriptor) and sinks/registry lists them in the
// SinkCatalog Load checks plans against: a section's validation, defaults,
// fingerprint, JSON Schema and the command line's choices follow from it.
type SinkDescriptor struct {
	Type SinkType
	// Summary says in one line what the sink writes to.
	Summary string
	// NewConfig returns a pointer to a new, zero config struct of the
	// type's own fields (those Fields describes, an inline struct's
	// included), which Load decodes and keeps in Sink.Config; nil for none.
	NewConfig func() any
	// Fields describe the type's own fields, one per yaml field of
	// NewConfig's struct, beside the common ones (SinkCatalog.CommonFields);
	// the fingerprint takes its fields in this order.
	Fields []FieldDescriptor
	// Check validates the section's own rules, beyond what Fields say (a
	// required field, an enum), after the common checks; nil for none.
	Check func(c *SinkCheck)
	// Defaults completes a section after the fields' own Defaults (a
	// default that depends on other fields); nil for none.
	Defaults func(s *Sink, deadLetter bool)
	// Schema are JSON Schema rules across the section's fields (if/then),
	// beyond its required fields, for `replay schema`.
	Schema []map[string]any
	// Secrets returns the credentials a section holds among other things
	// (a DSN's password, a header's token), beyond the fields marked
	// Secret, for redaction (Plan.Secrets); written returns a field's
	// value before its ${VAR}s were expanded (false for none). nil for none.
	Secrets func(s *Sink, written func(name string) (string, bool)) []string

	// Shared reports whether several processes can write the output at
	// once (`run --join`), as the sink or the dead-letter sink.
	Shared bool
	// Service is what the sink writes to when that is a service with live
	// traffic of its own ("database", "service"), which a replay without a
	// throttle can starve; "" for the others.
	Service string
	// WritesStdout reports that the records go to standard output: the run
	// prints its tables elsewhere, and draws no progress over them.
	WritesStdout bool
	// UsesKey reports whether the sink writes the idempotency key, so that
	// `replay test` reports a key template that fails.
	UsesKey bool
	// StagingDir, set for a type whose output appears only when the run
	// completes, returns where a section's unpublished output waits ("" for none).
	StagingDir func(s *Sink) string
	// Unfinished says what readers of the output see of a run that has
	// not completed; "" is "not published: the output appears when the run completes".
	Unfinished string
	// Checkpoints names where a section records the checkpoints a run can
	// resume from (--resume-from-sink), for messages ("checkpoint table
	// replay_checkpoints"); "" or nil when it keeps none.
	Checkpoints func(s *Sink) string
	// CheckpointsField is the field that makes a section keep checkpoints,
	// for messages: "checkpoint_table".
	CheckpointsField string
	// FencesOthers reports whether a section keeps a second run of the plan
	// out by itself (an exactly-once kafka sink's transactional ids), so
	// that the run does not hold its group; nil is false.
	FencesOthers func(s *Sink) bool
	// Where names the output of a section in a run's summary; nil names
	// the type.
	Where func(s *Sink) string
	// Notes says what a section would write for the resolved ranges, and
	// warns of a likely mistake, for `replay plan`; nil for none.
	Notes func(s *Sink, ranges []RangeSize) []SinkNote
	// JSONLines returns the path of the one local file of JSON objects
	// holding each record's partition, offset and timestamp a section
	// writes, which `replay demo` reads back; "" or nil for other output.
	JSONLines func(s *Sink) string
	// DeadLetterInLine reports whether a dead-letter sink of the section
	// writes each dead letter's reason and source coordinates in its JSON
	// line; nil is false: they go in headers (sinks.WithDeadLetterHeaders).
	DeadLetterInLine func(s *Sink) bool
	// Shard returns the section's config for shard index of count (replay
	// run --shard I/N), a copy when it changes (the file sink's {shard}),
	// or an error saying why the section cannot run so; count 0 is a run
	// without shards. nil: every shard writes the section as it is.
	Shard func(s *Sink, index, count int) (any, error)
	// WholePartitionShards reports whether a section's shards must hold
	// whole partitions (replay plan --shards never splits one); nil is false.
	WholePartitionShards func(s *Sink) bool
	// Topic returns the section's config for one topic of a plan of
	// several (Plan.ForTopic), after TopicPlaceholder was replaced, where
	// the placeholder cannot keep the topics apart; nil: the section as it is.
	Topic func(s *Sink, topic string) any
	// OwnOutput names the output of a section that no other topic of a
	// plan of several may write too (a file); "" or nil when topics may
	// share it (a table, a target topic, a service).
	OwnOutput func(s *Sink) string
}

// FieldDescriptor describes one field of a sink section.
type FieldDescriptor struct {
	// Name is the field's yaml key: that of a field of the type's config
	// struct (SinkDescriptor.NewConfig).
	Name string
	// Doc says what the field is, its default and an example.
	Doc string
	// Default is the value an unset (zero) field takes, as a plan would
	// write it ("" when none).
	Default string
	// Secret reports whether the value is a credential: it must come from
	// the environment (${VAR}), and the command line redacts it.
	Secret bool
	// Required is the problem reported when the field is not set (a
	// "missing: ..." message); "" for an optional field.
	Required string
	// Enum lists the values the field accepts, when it is a choice.
	Enum []string
	// Schema is the JSON Schema of the value (see OrEnv), when the one
	// derived from its Go type and Enum is not precise enough.
	Schema map[string]any
	// Credentials reports whether the value may hold a credential among
	// other things (a DSN, a URL, headers): messages never quote it from
	// the environment, and the descriptor's Secrets finds it.
	Credentials bool
	// Fingerprint reports whether the field is part of the plan's
	// fingerprint, under its Go field's name; false when it changes how,
	// not what, the sink writes.
	Fingerprint bool
	// FingerprintValue returns the value the fingerprint holds for the
	// field given its value val in section s (nil: val); unset values are
	// left out.
	FingerprintValue func(val any, s *Sink, deadLetter bool) any
}

// commonSinkFields are the fields every sink type takes; the doc of type
// lists the catalog's types (CommonFields).
var commonSinkFields = []FieldDescriptor{
	{Name: "type", Doc: "Sink type: "},
	{Name: "key", Doc: "Idempotency key: a Go template over the record, e.g. '{{ .Value.id }}'; default <topic>/<partition>/<offset>. The kafka sink's replay-key header (and, when set, its message key in place of the source key); the http sink's idempotency_key; the column mapped to key."},
	{Name: "batch_size", Doc: "Largest number of records per durable write, and so between two commits: 1..100000 (default 1000 when unset); an http sink posts at most this many per request."},
	{Name: "retry", Doc: "How long a write that fails with a transient error (a lost connection, a failover, lock contention, a broker restart) is retried, with capped exponential backoff and jitter, before the partition fails (exit 1, resumable): {max_elapsed: 5m} (default 5m, up to 24h; 0s fails at the first error). An http sink's own retries (max_retries) stop at it too."},
}

// SinkCatalog is the set of sink types a plan may use, in the order
// messages and the JSON Schema list them. sinks/registry builds it from the
// drivers (registry.Catalog); Load takes it in LoadOptions.Sinks.
type SinkCatalog []SinkDescriptor

// CommonFields returns the descriptors of the fields every sink type takes
// (type, key, batch_size, retry). The result is the caller's.
func (c SinkCatalog) CommonFields() []FieldDescriptor {
	out := slices.Clone(commonSinkFields)
	out[0].Doc += OrList(c.Types()) + "."
	return out
}

// Lookup returns the descriptor of sink type t; false when the catalog
// has no such type.
func (c SinkCatalog) Lookup(t SinkType) (SinkDescriptor, bool) {
	i := slices.IndexFunc(c, func(d SinkDescriptor) bool { return d.Type == t })
	if i < 0 {
		return SinkDescriptor{}, false
	}
	return c[i], true
}

// Types returns the catalog's sink types, in order.
func (c SinkCatalog) Types() []SinkType { return c.types(func(SinkDescriptor) bool { return true }) }

// SharedTypes returns the sink types whose output several processes can
// write at once (SinkDescriptor.Shared), in order.
func (c SinkCatalog) SharedTypes() []SinkType {
	return c.types(func(d SinkDescriptor) bool { return d.Shared })
}

func (c SinkCatalog) types(keep func(SinkDescriptor) bool) []SinkType {
	var out []SinkType
	for _, d := range c {
		if keep(d) {
			out = append(out, d.Type)
		}
	}
	return out
}

// check reports a descriptor that does not describe its config: a field
// descriptor without its field (or twice), a field without its descriptor,
// a field named as a common one (in the plan or the fingerprint), a
// NewConfig that returns no pointer to a struct. Load refuses such a
// catalog: a field left undecoded, unchecked or out of the fingerprint.
func (c SinkCatalog) check() error {
	for _, d := range c {
		if d.NewConfig != nil {
			if v := reflect.ValueOf(d.NewConfig()); v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
				return fmt.Errorf("plan: sink type %s: NewConfig returns %T, want a pointer to a struct", d.Type, d.NewConfig())
			}
		}
		names := d.ConfigNames()
		described := map[string]bool{}
		for _, f := range d.Fields {
			switch {
			case described[f.Name]:
				return fmt.Errorf("plan: sink type %s: field %s is described twice", d.Type, f.Name)
			case !slices.Contains(names, f.Name):
				return fmt.Errorf("plan: sink type %s: field %s is not a yaml field of its config (%v)", d.Type, f.Name, names)
			}
			if sf, _ := d.ConfigField(f.Name); f.Fingerprint && slices.ContainsFunc(fingerprintFrame, func(k frameKey) bool { return k.key == sf.Name && k.unset == nil }) {
				return fmt.Errorf("plan: sink type %s: field %s enters the fingerprint as %s, a common field's key: rename its Go field", d.Type, f.Name, sf.Name)
			}
			described[f.Name] = true
		}
		for _, n := range names {
			switch {
			case slices.ContainsFunc(commonSinkFields, func(f FieldDescriptor) bool { return f.Name == n }):
				return fmt.Errorf("plan: sink type %s: its config's field %s is a field every sink takes (plan.Sink)", d.Type, n)
			case !described[n]:
				return fmt.Errorf("plan: sink type %s: its config's field %s has no field descriptor", d.Type, n)
			}
		}
	}
	return nil
}

// CheckpointKeepers says which sections keep checkpoints of their own
// (SinkDescriptor.Checkpoints), for messages: "a postgres or sqlite sink
// with checkpoint_table"; "" when no type of the catalog keeps any.
func (c SinkCatalog) CheckpointKeepers() string {
	var fields []string
	byField := map[string][]SinkType{}
	for _, d := range c {
		if d.Checkpoints == nil {
			continue
		}
		if _, seen := byField[d.CheckpointsField]; !seen {
			fields = append(fields, d.CheckpointsField)
		}
		byField[d.CheckpointsField] = append(byField[d.CheckpointsField], d.Type)
	}
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = "a " + OrList(byField[f]) + " sink"
		if f != "" {
			parts[i] += " with " + f
		}
	}
	return strings.Join(parts, ", or ")
}

// Field returns the descriptor of the type-specific field name; nil when
// the type does not take it.
func (d SinkDescriptor) Field(name string) *FieldDescriptor {
	if i := slices.IndexFunc(d.Fields, func(f FieldDescriptor) bool { return f.Name == name }); i >= 0 {
		return &d.Fields[i]
	}
	return nil
}

// Required returns the names of the fields the type requires, in order.
func (d SinkDescriptor) Required() []string {
	var out []string
	for _, f := range d.Fields {
		if f.Required != "" {
			out = append(out, f.Name)
		}
	}
	return out
}

// OrEnv returns a JSON Schema that accepts what s accepts or a ${VAR}.
func OrEnv(s map[string]any) map[string]any {
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "string", "pattern": EnvPattern}}}
}

// EnvPattern matches a value holding a ${VAR}, expanded when the plan is
// loaded; a ${VAR} may stand for a value of any type.
const EnvPattern = `\$\{[A-Za-z_][A-Za-z0-9_]*\}`

// ConfigOf returns the type's own fields of section s: s.Config, which
// the section's descriptor made (NewConfig returns a *T); a new zero T when
// the section has none (a Sink built in memory with its type only). It
// panics when s.Config is of another type: a descriptor whose functions
// read another type's config.
func ConfigOf[T any](s *Sink) *T {
	if s.Config == nil {
		return new(T)
	}
	c, ok := s.Config.(*T)
	if !ok {
		panic(fmt.Sprintf("sink type %s: config is %T, not %T", s.Type, s.Config, c))
	}
	return c
}

// ConfigField returns the Go field of the type's config struct whose yaml
// name is name (an inline struct's fields included); false when the type
// has no such field.
func (d SinkDescriptor) ConfigField(name string) (reflect.StructField, bool) {
	f, ok := fieldNamed(d.configFields(), name)
	return f.field, ok
}

// ConfigNames returns the yaml names of the fields of the type's config
// struct, in order.
func (d SinkDescriptor) ConfigNames() []string { return yamlNames(d.configFields()) }

// configFields returns the fields of a new config of the type (nil without one).
func (d SinkDescriptor) configFields() []yamlField {
	if d.NewConfig == nil {
		return nil
	}
	return yamlFields(reflect.ValueOf(d.NewConfig()).Elem())
}

// yamlField is a field of a struct decoded from YAML: its yaml name, its
// Go field and its value.
type yamlField struct {
	name  string
	field reflect.StructField
	value reflect.Value
}

// yamlFields returns the fields of the struct v that have a yaml name, in
// order, those of an inline struct (`yaml:",inline"`) in its place.
func yamlFields(v reflect.Value) []yamlField {
	var out []yamlField
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline" && f.Type.Kind() == reflect.Struct:
			out = append(out, yamlFields(v.Field(i))...)
		case name != "" && name != "-" && f.IsExported():
			out = append(out, yamlField{name, f, v.Field(i)})
		}
	}
	return out
}

// fields returns the section's fields: the common ones, then its type's.
func (s *Sink) fields() []yamlField {
	out := yamlFields(reflect.ValueOf(s).Elem())
	if s.Config != nil {
		out = append(out, yamlFields(reflect.ValueOf(s.Config).Elem())...)
	}
	return out
}

// field returns the field of s whose yaml name is name, a common field or
// one of its type's; false when it has none.
func (s *Sink) field(name string) (yamlField, bool) { return fieldNamed(s.fields(), name) }

// fieldNamed returns the field of fs whose yaml name is name.
func fieldNamed(fs []yamlField, name string) (yamlField, bool) {
	i := slices.IndexFunc(fs, func(f yamlField) bool { return f.name == name })
	if i < 0 {
		return yamlField{}, false
	}
	return fs[i], true
}

// yamlNames returns the yaml names of fs, in order.
func yamlNames(fs []yamlField) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

// isSet reports whether the field with yaml name name holds a value: a
// non-empty string, list or map, or any other non-zero value.
func (s *Sink) isSet(name string) bool {
	f, ok := s.field(name)
	if !ok {
		return false
	}
	switch f.value.Kind() {
	case reflect.Slice, reflect.Map, reflect.String:
		return f.value.Len() > 0
	default:
		return !f.value.IsZero()
	}
}

// strs returns items as strings.
func strs[T ~string](items []T) []string {
	out := make([]string, len(items))
	for i, t := range items {
		out[i] = string(t)
	}
	return out
}

// OrList joins items as "a, b or c".
func OrList[T ~string](items []T) string {
	s := strs(items)
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
