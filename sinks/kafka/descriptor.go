package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Type is the kafka sink's type in a plan.
const Type plan.SinkType = "kafka"

// Section is a kafka sink's own fields in a plan (Descriptor.Fields says
// what each means), in Sink.Config.
type Section struct {
	Brokers         []string  `yaml:"brokers"`
	Topic           string    `yaml:"topic"`
	TLS             plan.TLS  `yaml:"tls"`
	SASL            plan.SASL `yaml:"sasl"`
	KeepPartition   bool      `yaml:"keep_partition"`
	ExactlyOnce     bool      `yaml:"exactly_once"`
	TransactionalID string    `yaml:"transactional_id"`
	Order           string    `yaml:"order"`
	// sourceTopic is the source topic of a section of one topic of a plan
	// of several (plan.ForTopic): its transactional ids end in it, apart
	// from the other topics'.
	sourceTopic string
}

// Orders of a kafka sink (Section.Order).
const (
	// OrderPartition: a source partition's records reach the target in
	// offset order (the default).
	OrderPartition = "partition"
	// OrderNone: the plan accepts a partition's records out of offset
	// order: a sharded run may split a partition between shards.
	OrderNone = "none"
)

// section returns the kafka sink's own fields of s.
func section(s *plan.Sink) *Section { return plan.ConfigOf[Section](s) }

// Descriptor describes the kafka sink's plan section.
var Descriptor = plan.SinkDescriptor{
	Type:      Type,
	Summary:   "Kafka topic, on the source cluster or another, with provenance headers",
	NewConfig: func() any { return new(Section) },
	Fields: []plan.FieldDescriptor{
		{Name: "brokers", Required: `missing: list the target cluster's bootstrap brokers, e.g. ["kafka-1:9092"] or ["${TARGET_KAFKA_BROKERS}"]`,
			Doc: "kafka: bootstrap brokers of the target cluster (the source cluster or another), host:port; or one ${VAR} holding a comma-separated list.",
			Schema: map[string]any{"anyOf": []any{
				map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1},
				map[string]any{"type": "string", "pattern": plan.EnvPattern},
			}, "examples": []any{[]any{"kafka-1:9092"}, "${TARGET_KAFKA_BROKERS}"}}},
		{Name: "topic", Fingerprint: true, Required: "missing: the topic to produce to (it must exist: replay does not create topics)",
			Doc: "kafka: the topic to produce to; it must exist."},
		{Name: "tls", Doc: "kafka: encrypted connection to the target cluster (independent of the source's)."},
		{Name: "sasl", Credentials: true, Doc: "kafka: authentication to the target cluster (independent of the source's): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."},
		{Name: "keep_partition", Fingerprint: true,
			Doc: "kafka: produce each record to the partition numbered as its source partition (mirroring; the target needs at least as many partitions) instead of hashing the key.",
			// A dead-letter topic's fingerprint never held it.
			FingerprintValue: func(val any, _ *plan.Sink, deadLetter bool) any { return val == true && !deadLetter }},
		{Name: "exactly_once", Fingerprint: true,
			Doc: "kafka: produce each batch in one Kafka transaction together with the replay group's offsets for it (default false): consumers reading with isolation.level=read_committed see each source record exactly once, whatever happens to the run. Needs a target that supports transactions and, with ACLs, Write on the TransactionalIds (IdempotentWrite on the cluster too on brokers before Kafka 2.8). Not with on_error: dead_letter or a dead-letter sink."},
		{Name: "order", Fingerprint: true, Enum: []string{OrderPartition, OrderNone},
			FingerprintValue: encode.DefaultAsUnset(OrderPartition),
			Doc:              "kafka: partition (default): a source partition's records reach the target in offset order, so 'replay plan --shards' gives each partition whole to one shard; none: the plan accepts them out of order, and shards may split a large partition between them (each part in order, the parts at once)."},
		{Name: "transactional_id",
			Doc: "kafka with exactly_once: prefix of the transactional ids, one per source partition (<prefix>-<partition>); default replay-<plan name>-<hash of the group>. A later run with the same ids fences any earlier process still producing."},
	},
	Check:        check,
	Shared:       true,
	UsesKey:      true,
	FencesOthers: func(s *plan.Sink) bool { return section(s).ExactlyOnce },
	// A partition's records reach the target in offset order: a sharded
	// run gives every partition to one shard, unless the plan accepts
	// them out of order.
	WholePartitionShards: func(s *plan.Sink) bool { return section(s).Order != OrderNone },
	Shard:                shard,
	Topic: func(ps *plan.Sink, topic string) any {
		c := *section(ps)
		c.sourceTopic = topic
		return &c
	},
	Where:   func(s *plan.Sink) string { return "kafka topic " + section(s).Topic },
	Secrets: func(s *plan.Sink, _ func(string) (string, bool)) []string { return []string{section(s).SASL.Password} },
}

// validTopic reports whether s is what Kafka accepts as a topic name: 1
// to 249 of ASCII letters, digits, '.', '_' and '-' (Topic.validate in
// Kafka's clients; "." and ".." are refused apart).
func validTopic(s string) bool { return nameOf(s, 249, "._-") }

// validTransactionalID reports whether s is what the exactly-once sink
// accepts as the prefix of its transactional ids: 1 to 200 printable
// characters without spaces (ASCII letters, digits, '.', '_', ':', '+',
// '-'), short enough for the suffix.
func validTransactionalID(s string) bool { return nameOf(s, 200, "._:+-") }

// nameOf reports whether s has 1 to most bytes, each an ASCII letter, a
// digit or one of punct.
func nameOf(s string, most int, punct string) bool {
	if len(s) == 0 || len(s) > most {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(punct, c) >= 0) {
			return false
		}
	}
	return true
}

// check checks a kafka section: its target, its connection settings and
// exactly_once.
func check(c *plan.SinkCheck) {
	s := section(c.Sink)
	c.Brokers("brokers", s.Brokers)
	if s.Topic != "" && (!validTopic(s.Topic) || s.Topic == "." || s.Topic == "..") {
		c.Add("topic", "%q is not a Kafka topic name (up to 249 letters, digits, '.', '_', '-')", s.Topic)
	}
	c.TLS("tls", s.TLS)
	c.SASL("sasl", s.SASL)
	if s.SASL.Mechanism == "PLAIN" && !s.TLS.Enabled {
		c.Warn("sasl.mechanism", "SASL PLAIN without TLS sends the password in clear text: enable %s.tls", c.Field)
	}
	exactlyOnce(c)
	if src := c.Plan.Source; s.Topic != "" && slices.Contains(c.Plan.Topics(), s.Topic) && plan.SameBrokers(s.Brokers, src.Brokers) {
		c.Warn("topic", "the target is a source topic (%s): the replayed records are appended to a topic being replayed, and its consumers read them again", s.Topic)
	}
}

// exactlyOnce checks exactly_once and transactional_id.
func exactlyOnce(c *plan.SinkCheck) {
	s := section(c.Sink)
	switch {
	case s.TransactionalID != "" && !s.ExactlyOnce:
		c.Add("transactional_id", "only applies with exactly_once: true: set exactly_once: true, or remove transactional_id")
	case s.TransactionalID != "" && !validTransactionalID(s.TransactionalID):
		c.Add("transactional_id", "%q: want up to 200 letters, digits, '.', '_', ':', '+', '-'", s.TransactionalID)
	}
	if !s.ExactlyOnce {
		return
	}
	switch {
	case c.DeadLetter():
		c.Add("exactly_once", "a dead-letter sink is written after the sink's transaction, so it cannot be part of it: remove exactly_once here")
	case c.Plan.OnError == plan.OnErrorDeadLetter:
		c.Add("exactly_once", "not with on_error: dead_letter: dead letters are written outside the transaction that commits the replay group's offsets, so a crash could lose them; use on_error: skip or fail")
	}
}

// shard keeps an explicit transactional_id apart between shards: each
// shard's producers get "-shard-<index>" after it (without one, the
// default prefix comes from the shard's own group).
func shard(ps *plan.Sink, index, count int) (any, error) {
	s := section(ps)
	c := *s
	if count > 1 && s.TransactionalID != "" {
		c.TransactionalID = fmt.Sprintf("%s-shard-%d", s.TransactionalID, index)
	}
	return &c, nil
}

// Open builds the kafka sink sp describes (a validated plan section of
// type kafka), connecting to its cluster. On error the Sink is nil.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	id := c.TransactionalID
	if c.ExactlyOnce && c.sourceTopic != "" {
		if id == "" {
			id = DefaultTransactionalID(sp.Options.PlanName, sp.Options.Group)
		}
		id += "-" + c.sourceTopic
	}
	return sinks.Opened(New(ctx, Config{Brokers: c.Brokers, Topic: c.Topic, TLS: c.TLS, SASL: c.SASL, KeepPartition: c.KeepPartition,
		KeyTemplate: strings.TrimSpace(sp.Plan.Key) != "", PlanName: sp.Options.PlanName, Log: sp.Options.Log,
		ExactlyOnce: c.ExactlyOnce, TransactionalID: id, Group: sp.Options.Group, SourceTopic: sp.Options.Topic,
		Partitions: sp.Options.Partitions, CommitMetadata: sp.Options.CommitMetadata, SourceClusterID: sp.Options.SourceClusterID,
		Member: sp.Options.Member, RetryBudget: time.Duration(sp.Plan.Retry.MaxElapsed)}))
}
