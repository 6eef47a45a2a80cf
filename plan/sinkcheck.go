package plan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// SinkCheck is what a sink type's Check sees: the section being validated,
// the plan around it, and where to report problems. Names given to its
// methods are the section's field names ("table", "sasl.mechanism").
type SinkCheck struct {
	// Field is where the section is: "sink" or "dead_letter".
	Field string
	// Sink is the section, defaulted.
	Sink *Sink
	// Plan is the plan being validated.
	Plan *Plan
	v    *validator
}

// DeadLetter reports whether the section is the dead-letter sink.
func (c *SinkCheck) DeadLetter() bool { return c.Field == "dead_letter" }

// Add reports a problem with the field name of the section.
func (c *SinkCheck) Add(name, format string, args ...any) { c.v.add(c.path(name), format, args...) }

// Warn reports a warning about the field name of the section.
func (c *SinkCheck) Warn(name, format string, args ...any) { c.v.warn(c.path(name), format, args...) }

// Present reports whether the field name is written in the section.
func (c *SinkCheck) Present(name string) bool { return c.v.present(c.path(name)) }

// Failed reports whether the field name failed to decode (already reported).
func (c *SinkCheck) Failed(name string) bool { return c.Plan.bad[c.path(name)] }

// FromEnv reports whether the value of the field name came from a ${VAR}.
func (c *SinkCheck) FromEnv(name string) bool { return c.Plan.FromEnv(c.path(name)) }

// Enum reports whether val is one of allowed, and a problem with the field
// name when it is not.
func (c *SinkCheck) Enum(name, val string, allowed []string) bool {
	return c.v.enum(c.path(name), val, allowed)
}

// Visible reports whether val, the value of the field name or, named by
// what ("column"), a part of it, holds no control or formatting character
// (Unicode Cc and Cf, as the group's check: bidirectional overrides,
// zero-width characters), and a problem with the field when it does.
func (c *SinkCheck) Visible(name, what, val string) bool {
	r, hides := firstRune(val, invisible)
	if hides {
		if what != "" {
			what += " "
		}
		c.Add(name, "%s%q contains the invisible character %U: control and formatting characters (bidirectional overrides, zero-width ones) make it read differently in review than it is; type it again", what, val, r)
	}
	return !hides
}

// Brokers checks a list of host:port addresses.
func (c *SinkCheck) Brokers(name string, list []string) { c.v.brokers(c.path(name), list) }

// TLS checks a TLS section.
func (c *SinkCheck) TLS(name string, t TLS) { c.v.tls(c.path(name), t) }

// SASL checks a SASL section: its password must come from the environment.
func (c *SinkCheck) SASL(name string, s SASL) { c.v.sasl(c.path(name), s) }

// ReadsValue records that the sink's field name reads the record's field
// (a value.<path>), so that a mapping step that drops or renames it away
// is a problem. Dead-letter sinks see records unmapped: nothing is recorded.
func (c *SinkCheck) ReadsValue(name, field string) {
	if keys := valuePath(field); len(keys) > 0 && !c.DeadLetter() {
		c.v.sinkReads = append(c.v.sinkReads, valueRead{keys, fmt.Sprintf("%s (%s)", c.path(name), field)})
	}
}

// TableName reports val, the value of the field name, when it is not a
// plain [schema.]table name.
func (c *SinkCheck) TableName(name, val string) {
	if val != "" && !tableRe.MatchString(val) {
		c.Add(name, "%q is not a plain table name ([schema.]name of ASCII letters, digits and _, not beginning with a digit)", val)
	}
}

// IsTableName reports whether s is a plain [schema.]table name.
func IsTableName(s string) bool { return tableRe.MatchString(s) }

// LiteralDSNPassword reports whether the PostgreSQL DSN of the field name,
// as written in the plan, holds a password that does not come from a
// ${VAR}: ${ORDERS_DSN} and postgres://app:${PGPASSWORD}@db/orders are
// fine, postgres://app:secret@${PGHOST}/orders is not.
func (c *SinkCheck) LiteralDSNPassword(name string) bool {
	f, ok := c.Sink.field(name)
	if !ok {
		return false
	}
	pw, ok := dsnPassword(c.v.asWritten(c.path(name), f.value.String()))
	return ok && !strings.Contains(pw, envPlaceholder)
}

func (c *SinkCheck) path(name string) string { return c.Field + "." + name }

// article returns "a kafka", "an http".
func article(sinkType SinkType) string {
	if strings.HasPrefix(string(sinkType), "http") {
		return "an " + string(sinkType)
	}
	return "a " + string(sinkType)
}

// sinkType checks a section's type field and returns its descriptor;
// false when there is none to check the rest of the section against.
func (v *validator) sinkType(field string, s *Sink) (SinkDescriptor, bool) {
	types := strs(v.p.sinks.Types())
	if s.Type == "" {
		v.add(field+".type", "missing: one of %s", strings.Join(types, ", "))
	} else if v.enum(field+".type", string(s.Type), types) {
		return v.p.sinks.Lookup(s.Type)
	}
	return SinkDescriptor{}, false
}

// sinkFields checks the type-specific fields of a section against the
// descriptors: a field written (not defaulted) for a type that does not
// take it, a required field unset, a choice not one of its values.
func (v *validator) sinkFields(field string, s *Sink, d SinkDescriptor) {
	seen := map[string]bool{}
	for _, o := range v.p.sinks {
		for _, f := range o.Fields {
			if seen[f.Name] || d.Field(f.Name) != nil || !v.present(field+"."+f.Name) {
				continue
			}
			seen[f.Name] = true
			takers := strs(v.p.sinks.types(func(t SinkDescriptor) bool { return t.Field(f.Name) != nil }))
			v.add(field+"."+f.Name, "does not apply to %s sink (only %s sinks take it): remove it", article(s.Type), strings.Join(takers, " and "))
		}
	}
	for _, f := range d.Fields {
		switch {
		case f.Required != "" && !s.isSet(f.Name):
			v.add(field+"."+f.Name, "%s", f.Required)
		case f.Secret && s.isSet(f.Name) && !v.p.FromEnv(field+"."+f.Name):
			v.add(field+"."+f.Name, "a literal secret must not be written in a plan: take it from the environment, e.g. %s: ${%s}, and export the variable", f.Name, strings.ToUpper(string(s.Type)+"_"+f.Name))
		}
		if val, ok := s.field(f.Name); ok && len(f.Enum) > 0 && val.value.Kind() == reflect.String && val.value.String() != "" {
			v.enum(field+"."+f.Name, val.value.String(), f.Enum)
		}
	}
	if d.Check != nil {
		d.Check(&SinkCheck{Field: field, Sink: s, Plan: v.p, v: v})
	}
}

// applySinkDefaults fills the unset fields of the section s at field
// (sink, dead_letter) with their defaults, its type's as its descriptor
// declares them, and replaces TopicPlaceholder in a plan of one topic.
func (p *Plan) applySinkDefaults(field string, s *Sink) {
	setUnwritten(p, field+".batch_size", &s.BatchSize, DefaultBatchSize)
	// A database failover or a broker restart passes.
	setUnwritten(p, field+".retry.max_elapsed", &s.Retry.MaxElapsed, Duration(DefaultSinkRetryMaxElapsed))
	if t := p.Source.Topic; t != "" && len(p.Source.Topics) == 0 {
		defer s.replaceTopic(t)
	}
	d, ok := p.sinks.Lookup(s.Type)
	if !ok {
		return
	}
	if s.Config == nil && d.NewConfig != nil {
		s.Config = d.NewConfig() // a section that failed to decode
	}
	for _, f := range d.Fields {
		val, ok := s.field(f.Name)
		if !ok || f.Default == "" || !val.value.IsZero() {
			continue
		}
		if err := yaml.Unmarshal([]byte(f.Default), val.value.Addr().Interface()); err != nil {
			panic(fmt.Sprintf("sink type %s: default %q of %s: %v", d.Type, f.Default, f.Name, err))
		}
	}
	if d.Defaults != nil {
		d.Defaults(s, field == "dead_letter")
	}
}

// fingerprintFrame are the keys the first version's sink fingerprint held
// for every type, in order, each with its value for a type without the
// field (nil: a common field): kept so that no fingerprint changes.
var fingerprintFrame = []frameKey{{"Type", nil}, {"Path", ""}, {"Table", ""}, {"Key", nil}, {"OnConflict", "update"}}

// frameKey is a key of the fingerprint's frame and its value for a type
// without the field.
type frameKey struct {
	key   string
	unset any
}

// sinkFingerprint is a section's part of the fingerprint, as a JSON object:
// the frame (fingerprintFrame), then the other set fields its descriptor
// marks, in its order, each under its Go name.
func (p *Plan) sinkFingerprint(s *Sink, deadLetter bool) json.RawMessage {
	vals := map[string]any{"Type": string(s.Type), "Key": s.Key}
	var keys []string
	for _, f := range fingerprintFrame {
		keys = append(keys, f.key)
		if f.unset != nil {
			vals[f.key] = f.unset
		}
	}
	frame := keys
	d, _ := p.sinks.Lookup(s.Type)
	for _, f := range d.Fields {
		fv, ok := s.field(f.Name)
		if !f.Fingerprint || !ok {
			continue
		}
		val := fv.value.Interface()
		if f.FingerprintValue != nil {
			val = f.FingerprintValue(val, s, deadLetter)
		}
		key := fv.field.Name
		if !slices.Contains(frame, key) {
			if val == nil || reflect.ValueOf(val).IsZero() {
				continue
			}
			keys = append(keys, key)
		}
		vals[key] = val
	}
	b := []byte("{")
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(vals[k])
		b = append(append(append(b, kj...), ':'), vj...)
	}
	return append(b, '}')
}

// Schedule reports whether the plan's window is a schedule (every or start
// written).
func (c *SinkCheck) Schedule() bool {
	return c.v.present("window.every") || c.v.present("window.start")
}
