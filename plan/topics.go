package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// TopicPlaceholder stands for the source topic in the string fields of a
// sink section (a table, a path, a target topic, a url).
const TopicPlaceholder = "{topic}"

// TopicOverride changes, for the records of one topic of a plan of several
// (source.topics), what the plan says for all of them. An unset field
// keeps the plan's; filter: "" and mapping: [] turn the plan's off.
type TopicOverride struct {
	// Filter replaces the plan's filter.
	Filter *string `yaml:"filter"`
	// Mapping replaces the plan's mapping.
	Mapping *Mapping `yaml:"mapping"`
	// Key replaces the sink's idempotency key template (sink.key).
	Key *string `yaml:"key"`
	// Table, Path and Topic replace the sink's field of that name.
	Table *string `yaml:"table"`
	Path  *string `yaml:"path"`
	Topic *string `yaml:"topic"`
}

// Topics returns the plan's source topics: source.topics, or the one of
// source.topic.
func (p *Plan) Topics() []string {
	if len(p.Source.Topics) > 0 {
		return slices.Clone(p.Source.Topics)
	}
	return []string{p.Source.Topic}
}

// SeveralTopics reports whether p reads several topics (source.topics):
// its runs, status and resets go topic by topic through ForTopic.
func (p *Plan) SeveralTopics() bool {
	return len(p.Source.Topics) > 0 && p.Source.Topic == ""
}

// OfTopicSet reports whether p is the plan of one topic of a plan of
// several (ForTopic).
func (p *Plan) OfTopicSet() bool {
	return len(p.Source.Topics) > 0 && p.Source.Topic != ""
}

// ForTopic returns the plan of topic, one of the topics of a plan of
// several: source.topic is topic, with the topic's overrides and {topic}
// replaced, and the whole plan's group, window, throttle and fingerprint,
// so that its commits and checkpoints are the plan's. A plan of one topic
// is returned as it is (for its own topic).
func (p *Plan) ForTopic(topic string) (*Plan, error) {
	if !p.SeveralTopics() {
		if topic != p.Source.Topic {
			return nil, fmt.Errorf("plan %s reads topic %s, not %s", p.Name, p.Source.Topic, topic)
		}
		return p, nil
	}
	if !slices.Contains(p.Source.Topics, topic) {
		return nil, fmt.Errorf("plan %s reads topics %s, not %s", p.Name, strings.Join(p.Source.Topics, ", "), topic)
	}
	t, bad := p.forTopic(topic)
	if len(bad) > 0 {
		return nil, fmt.Errorf("overrides.%s.%s: the %s sink has no %s field", topic, bad[0], p.Sink.Type, bad[0])
	}
	return t, nil
}

// forTopic is ForTopic for a topic of p's; bad lists the sink fields
// topic's override sets that p's sink type does not have (left out).
func (p *Plan) forTopic(topic string) (_ *Plan, bad []string) {
	t := *p
	t.fixedFingerprint = p.Fingerprint()
	t.Source.Topic = topic
	t.filter = nil
	t.pos = maps.Clone(p.pos)
	o := p.Overrides[topic]
	if o.Filter != nil {
		t.Filter = *o.Filter
		delete(t.pos, "filter")
		if t.Filter != "" { // "": every record passes
			t.pos["filter"] = p.pos["overrides."+topic+".filter"]
		}
	}
	if o.Mapping != nil {
		t.Mapping = *o.Mapping
		t.pos["mapping"] = p.pos["overrides."+topic+".mapping"]
	}
	t.Sink, t.DeadLetter = *copySink(&p.Sink), copySink(p.DeadLetter)
	sets := map[string]*string{"key": o.Key, "path": o.Path, "table": o.Table, "topic": o.Topic}
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		switch f, ok := t.Sink.field(name); {
		case sets[name] == nil:
		case ok && f.value.Kind() == reflect.String && f.value.CanSet():
			f.value.SetString(*sets[name])
			t.pos["sink."+name] = p.pos["overrides."+topic+"."+name]
		default:
			bad = append(bad, name)
		}
	}
	for _, s := range []*Sink{&t.Sink, t.DeadLetter} {
		if s == nil {
			continue
		}
		s.replaceTopic(topic)
		if d, ok := p.sinks.Lookup(s.Type); ok && d.Topic != nil {
			s.Config = d.Topic(s, topic)
		}
	}
	return &t, bad
}

// copySink returns a copy of s whose Config is a copy of s's; nil for nil.
func copySink(s *Sink) *Sink {
	if s == nil {
		return nil
	}
	c := *s
	if c.Config != nil {
		cfg := reflect.New(reflect.TypeOf(c.Config).Elem())
		cfg.Elem().Set(reflect.ValueOf(c.Config).Elem())
		c.Config = cfg.Interface()
	}
	return &c
}

// replaceTopic replaces TopicPlaceholder with topic in the string fields
// of s's type.
func (s *Sink) replaceTopic(topic string) {
	if s.Config == nil {
		return
	}
	for _, f := range yamlFields(reflect.ValueOf(s.Config).Elem()) {
		if f.value.Kind() == reflect.String && f.value.CanSet() && strings.Contains(f.value.String(), TopicPlaceholder) {
			f.value.SetString(strings.ReplaceAll(f.value.String(), TopicPlaceholder, topic))
		}
	}
}

// validateTopics validates a plan of several topics: the topic set and its
// overrides, then the plan of each topic (ForTopic), each problem once.
func (p *Plan) validateTopics(now time.Time) []Problem {
	v := &validator{p: p, now: now}
	v.topicSet()
	seen := map[string]bool{}      // each problem once
	outputs := map[string]string{} // an output that one topic must own -> the topic
	shared := map[string][]string{}
	for i, topic := range p.Source.Topics {
		if topic == "" || TopicNameProblem(topic) != "" || slices.Index(p.Source.Topics, topic) < i {
			continue // refused by topicSet
		}
		t, bad := p.forTopic(topic)
		for _, name := range bad {
			v.add("overrides."+topic+"."+name, "the %s sink has no %s field: overrides set a sink's table, path or (kafka) topic", p.Sink.Type, name)
		}
		for _, pr := range t.validate(now) {
			pr.Field = overriddenField(p, topic, pr.Field)
			if k := pr.Field + "\x00" + pr.Message; !seen[k] {
				seen[k] = true
				v.out = append(v.out, pr)
			}
		}
		for _, fs := range []struct {
			field string
			s     *Sink
		}{{"sink", &t.Sink}, {"dead_letter", t.DeadLetter}} {
			field, s := fs.field, fs.s
			d, ok := p.sinks.Lookup(sinkTypeOf(s))
			if ok && d.Service == "database" && field == "sink" {
				name := string(s.Type)
				if d.Where != nil {
					name = d.Where(s)
				}
				shared[name] = append(shared[name], topic)
			}
			out := ""
			if ok && d.OwnOutput != nil {
				out = d.OwnOutput(s)
			}
			if other, dup := outputs[out]; dup && out != "" {
				hint := fmt.Sprintf("put %s in its path (e.g. out/%s.jsonl)", TopicPlaceholder, TopicPlaceholder)
				if field == "sink" {
					hint += fmt.Sprintf(", or set overrides.%s.path", topic)
				}
				v.add(field, "topics %s and %s would both write %s: each topic's output must be its own; %s", other, topic, out, hint)
			} else {
				outputs[out] = topic // "" is no output of its own
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(shared)) {
		if topics := shared[name]; len(topics) > 1 && !p.Sink.isSet("version") {
			v.warn("sink", "topics %s all write %s without a version: when two of them write one key, the row holds whichever was written last (the topics are replayed in the order of source.topics); set sink.version to a field that orders them, e.g. version: value.updated_at", strings.Join(topics, ", "), name)
		}
	}
	return v.out
}

// sinkTypeOf is s's type, "" for a nil section.
func sinkTypeOf(s *Sink) SinkType {
	if s == nil {
		return ""
	}
	return s.Type
}

// overriddenField names the field of topic's override that set field of
// its plan (filter, mapping, sink.key, sink.table, ...), field itself when
// the override does not set it.
func overriddenField(p *Plan, topic, field string) string {
	o, ok := p.Overrides[topic]
	if !ok {
		return field
	}
	over := map[string]bool{"filter": o.Filter != nil, "mapping": o.Mapping != nil, "sink.key": o.Key != nil,
		"sink.table": o.Table != nil, "sink.path": o.Path != nil, "sink.topic": o.Topic != nil}
	for f, set := range over {
		if set && within(field, f) {
			return "overrides." + topic + "." + strings.TrimPrefix(field, "sink.")
		}
	}
	return field
}

// topicSet checks source.topics and overrides, and what a plan of several
// topics cannot combine with.
func (v *validator) topicSet() {
	p := v.p
	seen := map[string]bool{}
	for i, t := range p.Source.Topics {
		field := fmt.Sprintf("source.topics[%d]", i)
		switch {
		case t == "":
			v.add(field, "empty: name a topic, or drop the item")
		case seen[t]:
			v.add(field, "%s is listed twice: list each topic once", t)
		case TopicNameProblem(t) != "":
			v.add(field, "%s", strings.Replace(TopicNameProblem(t), ": a plan replays one topic; write one plan per topic", ": list each topic as its own item, e.g. [orders, refunds]", 1))
		}
		seen[t] = true
	}
	if p.Window.Kind() == WindowOffsets && len(p.Window.Offsets) > 0 {
		v.add("window.offsets", "per-partition offsets name partitions of one topic, and source.topics lists several: use offsets: {all: {from: ..., to: ...}}, a time window, or one plan per topic")
	}
	if p.Window.IsSchedule() {
		v.add("window", "a schedule window reads one topic: write one plan per topic (source.topic), each with its own group")
	}
	if !p.Source.Partitions.All {
		v.add("source.partitions", "a partition list names partitions of one topic, and source.topics lists several: use partitions: all, or one plan per topic")
	}
	for _, t := range slices.Sorted(maps.Keys(p.Overrides)) {
		if !seen[t] {
			v.add("overrides."+t, "%s is not one of source.topics (%s): overrides are keyed by the topics the plan reads", t, strings.Join(p.Source.Topics, ", "))
		}
	}
}

// fingerprint is the override's part of the plan's fingerprint: the
// fields it sets, in a fixed order.
func (o TopicOverride) fingerprint() string {
	var b strings.Builder
	str := func(name string, v *string) {
		if v != nil {
			fmt.Fprintf(&b, "%s=%q;", name, *v)
		}
	}
	str("filter", o.Filter)
	if o.Mapping != nil {
		fmt.Fprintf(&b, "mapping=%s;", o.Mapping.String())
	}
	str("key", o.Key)
	str("table", o.Table)
	str("path", o.Path)
	str("topic", o.Topic)
	return b.String()
}
