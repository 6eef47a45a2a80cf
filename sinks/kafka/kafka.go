// Package kafka is the sink that produces records to a Kafka topic.
package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/kafkaconn"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// Provenance headers the kafka sink adds to every message, after the
// record's own headers.
const (
	HeaderSourceTopic     = "replay-source-topic"
	HeaderSourcePartition = "replay-source-partition"
	HeaderSourceOffset    = "replay-source-offset"
	// HeaderSourceTimestamp is the record timestamp, RFC 3339 in UTC with
	// milliseconds (also the message timestamp).
	HeaderSourceTimestamp = "replay-source-timestamp"
	HeaderPlan            = "replay-plan"
	// HeaderKey carries the record's idempotency key (the key template,
	// default "<topic>/<partition>/<offset>"), after the other provenance
	// headers: a consumer tells a re-delivery from a new record by it.
	HeaderKey = "replay-key"
	// HeaderMapped ("1"), before HeaderKey, marks a message whose value is
	// the plan's mapping of the source record's value, not its bytes.
	HeaderMapped = "replay-mapped"
)

var mappedValue = []byte("1")

// Config configures a Kafka sink.
type Config struct {
	// Brokers are the target cluster's bootstrap addresses, host:port; an
	// entry may hold a comma-separated list.
	Brokers []string
	// Topic is the target topic. It must exist: the sink does not create it.
	Topic string
	// TLS and SASL configure the connection to the target cluster.
	TLS  plan.TLS
	SASL plan.SASL
	// KeepPartition produces each record to the partition numbered as its
	// source partition; else the partition is Partition's: murmur2 of the
	// message key as the Java producer chooses it, a null key's source
	// partition modulo the target's partition count.
	KeepPartition bool
	// ClientID is sent to the brokers; default "replay".
	ClientID string
	// MaxAttempts is how often a message is sent before Write fails (with
	// backoff from 100ms to 1s between attempts); default 10. At least
	// once only; Write gives up after deliveryTimeout in any case.
	MaxAttempts int
	// KeyTemplate is set when the records' idempotency keys (the HeaderKey
	// header, record.Record.IdemKey) come from a key template (key: in the
	// plan): the key then also replaces the message key; without one the
	// message keeps the source record's key.
	KeyTemplate bool
	// PlanName is the value of the replay-plan header.
	PlanName string
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger

	// ExactlyOnce produces each Write in one Kafka transaction together
	// with Group's offset after the batch for SourceTopic (KIP-98); see
	// Sink. TransactionalID is the prefix of the transactional ids (default
	// DefaultTransactionalID), Partitions the source partitions whose
	// producers start in New (without Member), CommitMetadata the metadata of each offset
	// commit, TransactionTimeout the transaction.timeout.ms (default
	// DefaultTransactionTimeout).
	ExactlyOnce        bool
	TransactionalID    string
	Group, SourceTopic string
	Partitions         []int32
	CommitMetadata     func(partition int32) string
	TransactionTimeout time.Duration
	// SourceClusterID is the id of the cluster the runner commits the
	// group's offsets to (sinks.Options.SourceClusterID): when the target
	// cluster reports the same id, the sink is the group's only committer
	// (sinks.Capabilities.Offsets).
	SourceClusterID string
	// Member is the process's member of the replay group under run --join
	// (sinks.Options.Member); nil otherwise.
	Member func() (generation int32, memberID string)
	// RetryBudget is how long a call of the exactly-once sink outside
	// Write (starting its transactional producers in New, reading and
	// resetting the checkpoints) may keep failing with transient errors,
	// from its first failure, before it fails: the plan's
	// sink.retry.max_elapsed, which bounds the runner's retries of Write.
	// 0 fails at the first error.
	RetryBudget time.Duration
}

// Sink produces records to a topic, of the source cluster or another one.
//
// Each record becomes one message (see records); a tombstone stays a
// tombstone. The partition is Partition's.
//
// Idempotency: Kafka cannot overwrite a message, so a re-delivered record
// is produced again, the same message. Consumers that dedupe by replay-key,
// or keep the latest value per key (a compacted target topic), end up with
// the same state as after one clean run; consumers that count messages do
// not.
//
// Exactly once (Config.ExactlyOnce): each Write is one Kafka transaction
// of the source partition's transactional producer (transactional id
// <prefix>-<partition>) holding the batch's messages and the replay
// group's offset after the batch (AddOffsetsToTxn, TxnOffsetCommit), kept
// on the target cluster. A read_committed consumer of the target sees
// each source record once: a Write that fails or a process that dies
// mid-transaction leaves an aborted transaction, invisible to it, and the
// sink is a sinks.CheckpointStore reading the group's offsets back with
// RequireStable (KIP-447), so a resume starts after the last committed
// transaction. Its messages are built as at least once. A producer fenced
// by another process with the same id fails Write with *FencedError.
//
// Write is synchronous: it returns once every message is acknowledged by
// all in-sync replicas (acks=all), by an idempotent franz-go producer. It
// is safe for concurrent use and keeps nothing of the batch: it returns
// only once the producer finished every message, a cancelled Write too.
type Sink struct {
	// cl is the at-least-once producer (nil with exactly once).
	cl        *kgo.Client
	client    *kafka.Client
	transport *kafka.Transport
	topic     string
	where     string // topic and brokers, for messages
	keep      bool
	templated bool  // the plan's key: template makes the message key
	maxBytes  int64 // the topic's max.message.bytes (readTopicConfig)
	// tsBefore and tsAfter bound a message's timestamp around now (0: no
	// bound; readTopicConfig).
	tsBefore, tsAfter time.Duration
	planName          string
	log               zerolog.Logger

	mu         sync.Mutex
	partitions int // of the target topic, as last seen

	retries atomic.Int64 // see Retries

	txn *txnCommitter // exactly once; nil: at least once
}

var _ sinks.Sink = (*Sink)(nil)

// Capabilities: every message carries its record's idempotency key; an
// exactly-once sink keeps checkpoints in its transactions, and on the
// source cluster commits every offset of the group.
func (s *Sink) Capabilities() sinks.Capabilities {
	switch {
	case s.txn != nil && s.txn.onSource:
		return sinks.Capabilities{Checkpoints: s, Offsets: s, Keys: sinks.KeysAll}
	case s.txn != nil:
		return sinks.Capabilities{Checkpoints: s, Keys: sinks.KeysAll}
	}
	return sinks.Capabilities{Keys: sinks.KeysAll}
}

// kafkaMaxMessageBytes is the largest record batch the sink produces when
// the topic's max.message.bytes cannot be read: the brokers' default.
const kafkaMaxMessageBytes = 1 << 20

// kafkaBatchOverhead is what a record batch adds to its records' bytes
// (the v2 batch header and record framing), kept free under the topic's
// max.message.bytes.
const kafkaBatchOverhead = 512

// readTopicConfig reads the topic's max.message.bytes (DescribeConfigs),
// the largest record batch the broker accepts, which the sink's batches
// stay under so that only a record too large by itself is refused
// (kafkaMaxMessageBytes when unreadable); and, for a CreateTime topic, how
// far before and after the broker's clock a message's timestamp may be
// (message.timestamp.before.max.ms and after.max.ms, KIP-937, else
// message.timestamp.difference.max.ms), which the sink checks before
// producing: the broker refuses a whole batch for one such message
// (INVALID_TIMESTAMP).
func (s *Sink) readTopicConfig(ctx context.Context) {
	s.maxBytes = kafkaMaxMessageBytes
	resp, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: s.topic, ConfigNames: []string{"max.message.bytes", "message.timestamp.type",
			"message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "message.timestamp.difference.max.ms"}}}})
	if err != nil {
		s.log.Debug().Err(err).Str("topic", s.topic).Msg("kafka sink: cannot read the topic's config; assuming max.message.bytes 1 MiB")
		return
	}
	cfg := map[string]int64{}
	logAppend := false
	for _, r := range resp.Resources {
		if r.Error != nil {
			why := ""
			if errors.Is(r.Error, kafka.TopicAuthorizationFailed) {
				why = " (grant DescribeConfigs on it)"
			}
			s.log.Warn().Err(r.Error).Str("topic", s.topic).Msg("kafka sink: cannot read the target topic's config" + why + ": batches assume max.message.bytes 1 MiB, and timestamps are not checked against its limits")
			return
		}
	}
	for _, r := range resp.Resources {
		for _, e := range r.ConfigEntries {
			if n, err := strconv.ParseInt(e.ConfigValue, 10, 64); err == nil && n >= 0 {
				cfg[e.ConfigName] = n
			}
			logAppend = logAppend || e.ConfigName == "message.timestamp.type" && e.ConfigValue == "LogAppendTime"
		}
	}
	if n := cfg["max.message.bytes"]; n > kafkaBatchOverhead {
		s.maxBytes = n
	}
	if logAppend {
		return // the broker stamps the messages itself
	}
	limit := func(name string) time.Duration {
		n, ok := cfg[name]
		if !ok {
			n, ok = cfg["message.timestamp.difference.max.ms"]
		}
		if !ok || n >= math.MaxInt64/int64(time.Millisecond) {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	s.tsBefore, s.tsAfter = limit("message.timestamp.before.max.ms"), limit("message.timestamp.after.max.ms")
}

// New connects to the target cluster and checks that the topic exists.
// With SASL or TLS it first dials a broker with kafka.Dialer, which reports
// a failed authentication as such (the Transport reports "unexpected EOF").
func New(ctx context.Context, cfg Config) (*Sink, error) {
	brokers := plan.BrokerList(cfg.Brokers)
	if len(brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("kafka sink: brokers and topic are required")
	}
	conn, err := kafkaconn.New(kafkaconn.Settings{Section: "sink", Brokers: brokers, TLS: cfg.TLS, SASL: cfg.SASL,
		ClientID: cfg.ClientID, MetadataTopics: []string{cfg.Topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	s := &Sink{
		client:    &kafka.Client{Addr: kafka.TCP(brokers...), Transport: conn.Transport, Timeout: 30 * time.Second},
		transport: conn.Transport,
		topic:     cfg.Topic,
		where:     fmt.Sprintf("topic %s on %s", cfg.Topic, strings.Join(brokers, ",")),
		keep:      cfg.KeepPartition,
		templated: cfg.KeyTemplate,
		planName:  cfg.PlanName,
		log:       cfg.Log,
	}
	brokers, err = s.probe(ctx, conn)
	if err != nil {
		conn.Transport.CloseIdleConnections()
		return nil, err
	}
	s.readTopicConfig(ctx)
	if cfg.ExactlyOnce {
		s.txn, err = newTxnCommitter(ctx, cfg, brokers, s.where, s.maxBytes-kafkaBatchOverhead, &s.retries)
	} else {
		s.cl, err = newProducer(cfg, brokers, s.maxBytes-kafkaBatchOverhead)
	}
	if err != nil {
		conn.Transport.CloseIdleConnections()
		return nil, err
	}
	for _, w := range conn.Warnings {
		s.log.Warn().Str("topic", cfg.Topic).Msg("kafka sink: " + w)
	}
	s.log.Debug().Str("brokers", strings.Join(brokers, ",")).Str("topic", cfg.Topic).
		Int("partitions", s.partitions).Bool("keep_partition", s.keep).Msg("kafka sink ready")
	return s, nil
}

// deliveryTimeout bounds how long the at-least-once producer tries a
// message before Write fails (transient): a broker that keeps answering
// without taking the records cannot hang a run.
const deliveryTimeout = 2 * time.Minute

// newProducer starts the at-least-once producer: idempotent (KIP-98),
// acks=all, uncompressed (the broker applies the topic's
// compression.type), record batches under maxBatch bytes, no linger, each
// message tried cfg.MaxAttempts times (default 10) with backoff from
// 100ms to 1s.
func newProducer(cfg Config, brokers []string, maxBatch int64) (*kgo.Client, error) {
	opts, err := kgoOpts(cfg, brokers)
	if err != nil {
		return nil, err
	}
	attempts := cmp.Or(max(cfg.MaxAttempts, 0), 10)
	opts = append(opts, kgo.DefaultProduceTopic(cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(int32(min(maxBatch, 1<<30))), kgo.ProducerLinger(0),
		kgo.RecordRetries(attempts-1), kgo.MaxBufferedRecords(1<<20),
		kgo.RetryBackoffFn(func(tries int) time.Duration { return min(100*time.Millisecond<<max(tries-1, 0), time.Second) }))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return cl, nil
}

// probe fails early, with a message a person can act on, when the target
// cluster cannot be reached, refuses the credentials or lacks the topic.
func (s *Sink) probe(ctx context.Context, conn *kafkaconn.Conn) ([]string, error) {
	const timeout = 15 * time.Second
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := conn.Probe(pctx, timeout); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	s.client.Addr = conn.Addr()
	n, err := s.topicPartitionsAfterProbe(pctx, conn.SASL.Mechanism != "")
	if err != nil {
		return nil, err
	}
	s.partitions = n
	return conn.Brokers, nil
}

// probeDropWindow is how long, without SASL, the first Metadata request
// after the probe is retried while the broker closes its connections (a
// broker that requires SASL closes every one).
const probeDropWindow = 2 * time.Second

// topicPartitionsAfterProbe is topicPartitions retried, until ctx ends,
// while the broker answers with an error that may pass or the connection
// drops (without SASL, for probeDropWindow only). Each retry is counted
// and logged.
func (s *Sink) topicPartitionsAfterProbe(ctx context.Context, sasl bool) (int, error) {
	wait := 50 * time.Millisecond
	var dropped time.Time
	for attempt := 1; ; attempt++ {
		n, err := s.topicPartitions(ctx)
		var ke kafka.Error
		closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
		if closed && dropped.IsZero() {
			dropped = time.Now()
		}
		switch {
		case err == nil:
			return n, nil
		case closed && !sasl && time.Since(dropped) >= probeDropWindow:
			return 0, err
		case !closed && !(errors.As(err, &ke) && ke.Temporary()):
			return 0, err
		}
		s.retries.Add(1)
		s.log.Warn().Err(err).Int("attempt", attempt).Int64("retry_in_ms", wait.Milliseconds()).Msg("kafka sink: metadata of the target topic: retriable error, retrying")
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// topicPartitions asks the cluster how many partitions the topic has.
func (s *Sink) topicPartitions(ctx context.Context) (int, error) {
	md, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.topic}})
	if err != nil {
		return 0, fmt.Errorf("kafka sink: %s: %w (is the cluster reachable, and are sink.tls and sink.sasl right?)", s.where, err)
	}
	for _, t := range md.Topics {
		switch {
		case t.Name != s.topic || errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		case t.Error != nil:
			return 0, fmt.Errorf("kafka sink: %s: %w", s.where, s.writeACL(t.Error))
		default:
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("kafka sink: %s: the topic does not exist: create it first (replay does not create topics)", s.where)
}

// Write produces batch and returns once every message is acknowledged. A
// record too large to produce returns its *record.Error before anything is
// produced. A single message the broker rejects (MESSAGE_TOO_LARGE,
// INVALID_RECORD, ...) returns its *record.Error after the batch's other
// messages were produced: the runner hands that record to on_error and
// writes the others again, so they are in the topic twice (consumers dedupe
// by the replay-key header). Other failures are plain errors; messages of
// the batch may have been produced, and the re-delivery produces them again.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka sink: produce to %s: %w", s.where, err)
	}
	if s.keep {
		if err := s.checkPartition(ctx, batch[0].Partition); err != nil {
			return err
		}
	}
	if s.txn != nil {
		return s.writeTxn(ctx, batch)
	}
	recs, err := s.records(batch)
	if err != nil {
		return err
	}
	// kgo's delivery timeout counts from the (source) record timestamp.
	pctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	if pe := produceFailure(s.cl.ProduceSync(pctx, recs...)); pe != nil {
		return s.produceError(ctx, batch, pe)
	}
	s.log.Debug().Str("topic", s.topic).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("messages", len(recs)).Msg("produced")
	return nil
}

// checkPartition makes sure the target topic has the source partition p,
// refreshing the partition count once when it looks too small.
func (s *Sink) checkPartition(ctx context.Context, p int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(p) < s.partitions {
		return nil
	}
	n, err := s.topicPartitions(ctx)
	if err != nil {
		return err
	}
	s.partitions = n
	if int(p) >= n {
		return fmt.Errorf("kafka sink: keep_partition: %s has %d partitions, so source partition %d has no counterpart: add partitions to the target topic, or drop keep_partition to hash the key", s.where, n, p)
	}
	return nil
}

// produceError turns a failed ProduceSync into the error Write returns: the
// record's *record.Error when the broker refused it alone, a
// *sinks.TransientError when Kafka deems the failure retriable, else the
// error as is.
func (s *Sink) produceError(ctx context.Context, batch []record.Record, pe *produceError) error {
	err := fmt.Errorf("kafka sink: produce to %s: %d of %d messages failed: %w", s.where, pe.failed, len(batch), s.writeACL(pe.err))
	var ke *kerr.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("kafka sink: produce to %s: %w", s.where, ctx.Err())
	case pe.poison():
		return record.NewError(&batch[pe.first], err)
	case errors.Is(pe.err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w (was the topic deleted?)", err)
	case errors.As(pe.err, &ke) && !ke.Retriable:
		return err
	}
	return &sinks.TransientError{Err: err}
}

// writeACL adds to the target cluster's refusal of the topic
// (TOPIC_AUTHORIZATION_FAILED) or of the transactional ids the ACL to
// grant; other errors are returned as they are.
func (s *Sink) writeACL(err error) error {
	switch {
	case errors.Is(err, kafka.TopicAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("%w: the target cluster refuses this principal the topic: grant it Write on topic %s (it implies Describe)", err, s.topic)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed) && s.txn != nil:
		return fmt.Errorf("%w: the target cluster refuses this principal its transactional ids: grant it Write on the TransactionalIds with the prefix %s (it implies Describe)", err, s.txn.prefix)
	}
	return err
}

// poison reports whether the broker refused one message alone, for itself.
func (pe *produceError) poison() bool {
	var ke *kerr.Error
	return pe.failed == 1 && errors.As(pe.err, &ke) &&
		(ke == kerr.MessageTooLarge || ke == kerr.CorruptMessage || ke == kerr.InvalidRecord || ke == kerr.RecordListTooLarge || ke == kerr.InvalidTimestamp)
}

// Finish does nothing: every Write is already acknowledged.
func (s *Sink) Finish(context.Context) error { return nil }

// Close flushes and closes the producer.
func (s *Sink) Close() error {
	if s.cl != nil {
		s.cl.Close()
	}
	if s.txn != nil {
		s.txn.close()
	}
	s.transport.CloseIdleConnections()
	return nil
}
