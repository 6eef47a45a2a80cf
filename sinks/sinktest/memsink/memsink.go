// Package memsink is a sink type for tests: a bucket in memory. It is the
// whole of a sink type outside the drivers' catalog (its config struct,
// its descriptor and its Open), so that a test can add it to a catalog of
// its own (append(registry.Catalog(), memsink.Descriptor)) and show that
// validation, defaults, the fingerprint, the JSON Schema and the docs
// follow from a driver's package alone.
package memsink

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the memory sink's type in a plan.
const Type plan.SinkType = "memory"

// DefaultCapacity is Section.Capacity when the plan leaves it out.
const DefaultCapacity = 100

// MaxCapacity bounds Section.Capacity.
const MaxCapacity = 10000

// Modes are the values of mode: what a write does to the bucket.
var Modes = []string{"append", "replace"}

// Section is a memory sink's own fields in a plan, in Sink.Config.
type Section struct {
	// Bucket names the bucket the records go to (required).
	Bucket string `yaml:"bucket"`
	// Capacity is the most records the bucket keeps; default
	// DefaultCapacity, at most MaxCapacity.
	Capacity int `yaml:"capacity"`
	// Mode is append (default) or replace.
	Mode string `yaml:"mode"`
	// Token opens the bucket: a credential, from the environment.
	Token string `yaml:"token"`
}

func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the memory sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "bucket in memory, for tests",
	NewConfig: func() any { return new(Section) },
	Fields: []plan.FieldDescriptor{
		{Name: "bucket", Fingerprint: true, Required: "missing: the bucket to write to, e.g. orders",
			Doc: "memory: the bucket the records go to."},
		{Name: "capacity", Default: strconv.Itoa(DefaultCapacity),
			Doc:    "memory: the most records the bucket keeps, 1..10000 (default 100).",
			Schema: plan.OrEnv(map[string]any{"type": "integer", "minimum": 1, "maximum": MaxCapacity})},
		{Name: "mode", Fingerprint: true, Enum: Modes, Default: "append",
			Doc:              "memory: append (default: a write adds its records) or replace (a write replaces the bucket's records).",
			FingerprintValue: encode.DefaultAsUnset("append")},
		{Name: "token", Secret: true, Doc: "memory: the bucket's token; from the environment, e.g. ${MEMORY_TOKEN}."},
	},
	Check: func(c *plan.SinkCheck) {
		if n := section(c.Sink).Capacity; n < 1 || n > MaxCapacity {
			c.Add("capacity", "%d: want 1..%d records", n, MaxCapacity)
		}
	},
	Where: func(s *plan.Sink) string { return "memory bucket " + section(s).Bucket },
}

// Sink keeps the records written to it, in memory. It is safe for
// concurrent use.
type Sink struct {
	cfg Section
	mu  sync.Mutex
	got []record.Record
}

// Open builds the memory sink sp describes (a validated plan section of
// type memory). It does not fail.
func Open(_ context.Context, sp sinks.Spec) (sinks.Sink, error) {
	return &Sink{cfg: *section(&sp.Plan)}, nil
}

// Write keeps batch: after the bucket's records (mode append) or in their
// place (mode replace), the oldest dropped past the capacity.
func (s *Sink) Write(_ context.Context, batch []record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Mode == "replace" {
		s.got = nil
	}
	s.got = append(s.got, batch...)
	if over := len(s.got) - s.cfg.Capacity; s.cfg.Capacity > 0 && over > 0 {
		s.got = slices.Delete(s.got, 0, over)
	}
	return nil
}

// Records returns the records the bucket holds, oldest first.
func (s *Sink) Records() []record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// Capabilities: a memory sink offers nothing beyond Write.
func (s *Sink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// Finish does nothing: the records are kept as they are written.
func (s *Sink) Finish(context.Context) error { return nil }

// Close does nothing.
func (s *Sink) Close() error { return nil }
