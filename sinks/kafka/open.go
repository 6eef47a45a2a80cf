package kafka

import (
	"context"
	"strings"
	"time"

	"github.com/replay-tool/replay/sinks"
)

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
	s, err := New(ctx, Config{Brokers: c.Brokers, Topic: c.Topic, TLS: c.TLS, SASL: c.SASL, KeepPartition: c.KeepPartition,
		KeyTemplate: strings.TrimSpace(sp.Plan.Key) != "", PlanName: sp.Options.PlanName, Log: sp.Options.Log,
		ExactlyOnce: c.ExactlyOnce, TransactionalID: id, Group: sp.Options.Group, SourceTopic: sp.Options.Topic,
		Partitions: sp.Options.Partitions, CommitMetadata: sp.Options.CommitMetadata, SourceClusterID: sp.Options.SourceClusterID,
		Member: sp.Options.Member, RetryBudget: time.Duration(sp.Plan.Retry.MaxElapsed)})
	if err != nil {
		return nil, err
	}
	return s, nil
}
