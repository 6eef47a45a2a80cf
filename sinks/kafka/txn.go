package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/replay-tool/replay/sinks"
)

// DefaultTransactionTimeout is the exactly-once sink's transaction.timeout.ms:
// a transaction left open longer (a process frozen mid-batch) is aborted by
// the broker's transaction coordinator.
const DefaultTransactionTimeout = time.Minute

// txnRetryTimeout bounds franz-go's own retries of one request of the
// exactly-once sink (its default is 30 s).
const txnRetryTimeout = 5 * time.Second

// txnCommitter produces the exactly-once sink's batches: one transactional
// kgo client per source partition (transactional id <prefix>-<partition>).
type txnCommitter struct {
	base    []kgo.Opt // seed brokers, TLS, SASL, client id
	prefix  string
	group   string
	topic   string  // source topic: the group's offsets are for it
	parts   []int32 // source partitions of the run
	topicID [16]byte
	target  string
	timeout time.Duration
	meta    func(int32) string
	where   string
	admin   *kadm.Client
	// adminCl is capped at Kafka 3.9's request versions: it ends the
	// transactions holding offsets only with EndTxn v4, which keeps the
	// producer's epoch (v5 bumps it, behind kgo's back).
	adminCl *kgo.Client
	// onSource: the target cluster is the one the runner commits the
	// group's offsets to.
	onSource bool

	// member is the process's member of the group under run --join, whose
	// producers start lazily, once per generation.
	member func() (generation int32, memberID string)

	budget  time.Duration // see again
	retries *atomic.Int64 // see Sink.Retries
	log     zerolog.Logger

	mu        sync.Mutex
	producers map[int32]*kgo.Client
	// starting holds, per partition, the lock of starting its producer,
	// so that a partition's InitProducerID does not hold up the others'.
	starting map[int32]*sync.Mutex
	gens     map[int32]int32 // under run --join, each producer's generation
	// committed is, per partition, the offset this run's transactions
	// committed last: records below it are not produced again.
	committed map[int32]int64
	// unsure holds the partitions whose last transaction's outcome is
	// unknown: the next write reads the group again (settled).
	unsure map[int32]bool
	// hangingSeen is when this process first saw each transaction of an
	// earlier epoch open, by hangingTxn.key.
	hangingSeen map[string]time.Time
}

// newTxnCommitter starts a transactional producer for each partition of
// cfg.Partitions (InitProducerID fences an earlier process with the same
// ids; under run --join each starts on its first write in a generation
// instead) and checks that the target cluster can hold the group's
// offsets for the source topic, before anything is produced.
func newTxnCommitter(ctx context.Context, cfg Config, brokers []string, where string, maxBatch int64, retries *atomic.Int64) (*txnCommitter, error) {
	base, err := kgoOpts(cfg, brokers)
	if err != nil {
		return nil, err
	}
	base = append(base, kgo.ProducerBatchMaxBytes(int32(min(maxBatch, 1<<30))), kgo.RetryTimeout(txnRetryTimeout))
	prefix := cfg.TransactionalID
	if prefix == "" {
		prefix = DefaultTransactionalID(cfg.PlanName, cfg.Group)
	}
	t := &txnCommitter{base: base, prefix: prefix, group: cfg.Group, topic: cfg.SourceTopic, parts: cfg.Partitions, target: cfg.Topic,
		timeout: cmp.Or(cfg.TransactionTimeout, DefaultTransactionTimeout), meta: cfg.CommitMetadata, where: where, producers: map[int32]*kgo.Client{}, starting: map[int32]*sync.Mutex{}, committed: map[int32]int64{}, unsure: map[int32]bool{},
		member: cfg.Member, gens: map[int32]int32{}, hangingSeen: map[string]time.Time{}, budget: cfg.RetryBudget, log: cfg.Log, retries: retries}
	if t.meta == nil {
		t.meta = func(int32) string { return "" }
	}
	if t.group == "" || t.topic == "" {
		return nil, errors.New("kafka sink: exactly_once needs the replay group and the source topic")
	}
	if t.adminCl, err = kgo.NewClient(append(base[:len(base):len(base)], kgo.MaxVersions(kversion.V3_9_0()))...); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	t.admin = kadm.NewClient(t.adminCl)
	if err := t.again(ctx, "start the transactional producers", func(ctx context.Context) error { return t.start(ctx, cfg.Partitions) }); err != nil {
		t.close()
		return nil, err
	}
	if cfg.SourceClusterID != "" {
		var md kadm.Metadata
		err := t.again(ctx, "read the cluster id", func(ctx context.Context) error {
			var err error
			md, err = t.admin.BrokerMetadata(ctx)
			return transientIf(err)
		})
		if err != nil {
			t.close()
			return nil, fmt.Errorf("kafka sink: exactly_once: read the cluster id of %s: %w", where, err)
		}
		t.onSource = md.Cluster == cfg.SourceClusterID
	}
	return t, nil
}

func (t *txnCommitter) start(ctx context.Context, parts []int32) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	details, err := t.admin.ListTopics(sctx, t.topic)
	if err != nil {
		return transientIf(fmt.Errorf("kafka sink: exactly_once: read topic %s on %s: %w", t.topic, t.where, err))
	}
	d, ok := details[t.topic]
	if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) && retriable(d.Err) {
		// A leader election, a cluster loading: not a missing topic.
		return &sinks.TransientError{Err: fmt.Errorf("kafka sink: exactly_once: read topic %s on %s: %w", t.topic, t.where, d.Err)}
	}
	if need := int(slices.Max(slices.Concat(parts, []int32{-1}))) + 1; !ok || d.Err != nil || len(d.Partitions) < need {
		return fmt.Errorf("kafka sink: exactly_once keeps the replay group's offsets on the target cluster, in the transaction of each batch, and Kafka keeps offsets only for a topic the cluster has: the source topic %s (with at least %d partitions) is not on the target cluster of %s: create it there (it stays empty), or produce to the source cluster", t.topic, need, t.where)
	}
	t.topicID = d.ID
	if t.member != nil {
		parts = nil // each member fences only the partitions it is given
	}
	for _, p := range parts {
		if _, err := t.producer(sctx, p); err != nil {
			return err
		}
	}
	// The producers fenced (and so settled) any transaction of an earlier
	// process that the coordinator knew of; one it forgot is ended as its
	// offset commit ended: what the group holds now is final.
	if _, err := t.abortHanging(sctx, parts...); err != nil {
		return err
	}
	cps, err := t.checkpoints(sctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.Copy(t.committed, cps)
	return nil
}

// settled is the offset this run's transactions committed for p, once the
// outcome of p's last transaction is known: for an unsure partition it
// reads the group's stable offset first, so a transaction that committed
// although its answer was lost is not produced again. It fails (transient)
// while the offset cannot be read.
func (t *txnCommitter) settled(ctx context.Context, p int32) (int64, error) {
	t.mu.Lock()
	unsure, cl := t.unsure[p], t.producers[p]
	t.mu.Unlock()
	if unsure {
		// A new producer of p's transactional id (InitProducerID) makes
		// the outcome of its last transaction final.
		if cl != nil {
			t.drop(p, cl)
		}
		if _, err := t.producer(ctx, p); err != nil {
			return 0, err
		}
		// One the coordinator forgot hangs until it is ended.
		if _, err := t.abortHanging(ctx, p); err != nil {
			return 0, err
		}
		off, ok, err := t.stable(ctx, p)
		if err != nil {
			return 0, transientTxn(fmt.Errorf("kafka sink: read back the group's offset of partition %d, whose last transaction's outcome is unknown: %w", p, err))
		}
		t.mu.Lock()
		if ok {
			t.committed[p] = max(t.committed[p], off)
		}
		delete(t.unsure, p)
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.committed[p], nil
}

func (t *txnCommitter) markUnsure(p int32) {
	t.mu.Lock()
	t.unsure[p] = true
	t.mu.Unlock()
}

// id is the transactional id of source partition p.
func (t *txnCommitter) id(p int32) string { return t.prefix + "-" + strconv.Itoa(int(p)) }

// producer returns partition p's transactional client, starting it
// (InitProducerID) the first time; under run --join, the first time in
// each generation (the member that wrote p before is fenced), reading what
// the group holds for p once it did.
func (t *txnCommitter) producer(ctx context.Context, p int32) (*kgo.Client, error) {
	t.mu.Lock()
	start := t.starting[p]
	if start == nil {
		start = new(sync.Mutex)
		t.starting[p] = start
	}
	t.mu.Unlock()
	start.Lock()
	defer start.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	gen := int32(-1)
	if t.member != nil {
		if gen, _ = t.member(); gen < 0 {
			return nil, &lostError{id: t.id(p), err: errors.New("no generation")}
		}
	}
	if cl, ok := t.producers[p]; ok && (t.member == nil || t.gens[p] == gen) {
		return cl, nil
	} else if ok {
		cl.Close()
		delete(t.producers, p)
	}
	t.mu.Unlock()
	cl, err := t.initProducer(ctx, p)
	t.mu.Lock()
	if err != nil {
		return nil, err
	}
	if t.member != nil {
		t.mu.Unlock()
		cps, err := t.checkpoints(ctx)
		t.mu.Lock()
		if err != nil {
			cl.Close()
			return nil, transientTxn(err)
		}
		t.committed[p] = max(t.committed[p], cps[p])
		t.gens[p] = gen
	}
	t.producers[p] = cl
	return cl, nil
}

// initProducer starts partition p's transactional client (InitProducerID).
func (t *txnCommitter) initProducer(ctx context.Context, p int32) (*kgo.Client, error) {
	id := t.id(p)
	cl, err := kgo.NewClient(append(t.base[:len(t.base):len(t.base)],
		kgo.TransactionalID(id), kgo.TransactionTimeout(t.timeout), kgo.DefaultProduceTopic(t.target),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1<<20))...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, t.initError(id, err)
	}
	return cl, nil
}

// initError explains a failed InitProducerID.
func (t *txnCommitter) initError(id string, err error) error {
	switch {
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("kafka sink: exactly_once: the target cluster (%s) refuses transactional id %s to this principal (%w): grant it Write on TransactionalId %s or the prefix %s (it implies Describe; on brokers before Kafka 2.8 also IdempotentWrite on the cluster), or set exactly_once: false", t.where, id, err, id, t.prefix)
	case errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.TransactionCoordinatorFenced):
		return fmt.Errorf("kafka sink: exactly_once: the target cluster (%s) does not run transactions (%w): it needs Kafka 0.11 or later with a transaction state log (transaction.state.log.replication.factor no more than its brokers), or set exactly_once: false", t.where, err)
	case errors.Is(err, kerr.ProducerFenced):
		return &FencedError{TransactionalID: id, Err: err}
	case retriable(err):
		msg := ""
		if errors.Is(err, kerr.CoordinatorNotAvailable) {
			msg = " (if it lasts, the cluster may not run transactions: it needs a transaction state log, transaction.state.log.replication.factor no more than its brokers)"
		}
		return &sinks.TransientError{Err: fmt.Errorf("kafka sink: exactly_once: start the transactional producer %s on %s%s: %w", id, t.where, msg, err)}
	}
	return fmt.Errorf("kafka sink: exactly_once: start the transactional producer %s on %s: %w", id, t.where, err)
}

// write produces recs (all of source partition p) and commits the group's
// offset next for p in one transaction.
func (t *txnCommitter) write(ctx context.Context, p int32, next int64, recs []*kgo.Record) error {
	err := t.writeOnce(ctx, p, next, recs, false)
	// A transaction that ended as an abort although its commit was asked,
	// or that the broker refused for the producer's sequence numbers, is
	// written again a few times by a new producer, unless the group's
	// stable offset shows it committed after all.
	for tries := 1; (errors.Is(err, errNotCommitted) || errors.Is(err, errSequence)) && tries < notCommittedTries && ctx.Err() == nil; tries++ {
		t.retries.Add(1)
		t.log.Warn().Err(err).Str("transactional_id", t.id(p)).Int("attempt", tries).Msg("kafka sink: the batch's transaction did not commit: writing it again in a new one")
		done, serr := t.settled(ctx, p)
		if serr != nil {
			return serr
		}
		if done >= next {
			return nil
		}
		err = t.writeOnce(ctx, p, next, recs, tries == notCommittedTries-1)
	}
	return err
}

// errSequence marks a transaction aborted because the broker refused the
// producer's sequence numbers (OUT_OF_ORDER_SEQUENCE_NUMBER).
var errSequence = errors.New("the broker refused the producer's sequence numbers")

// errNotCommitted marks a transaction whose commit was answered without an
// error, yet whose group offset stayed below the batch's end: kgo's
// EndTransaction can turn a commit into an abort under KIP-890 part 2.
var errNotCommitted = errors.New("the transaction ended as an abort although its commit was asked")

// notCommittedTries is how many transactions one write makes for a batch.
const notCommittedTries = 3

// writeOnce is one try of write. On OUT_OF_ORDER_SEQUENCE_NUMBER it aborts
// the transaction and drops the producer, and returns an error wrapping
// errSequence unless last.
func (t *txnCommitter) writeOnce(ctx context.Context, p int32, next int64, recs []*kgo.Record, last bool) error {
	cl, err := t.producer(ctx, p)
	if err != nil {
		return err
	}
	began := time.Now()
	if err := cl.BeginTransaction(); err != nil {
		return t.failed(ctx, cl, p, next, err, began, false)
	}
	// kgo does not fail on ctx a batch it sent without an answer: closing
	// the client does, and the next producer of p's id aborts the
	// transaction.
	stop := context.AfterFunc(ctx, cl.Close)
	res := cl.ProduceSync(ctx, recs...)
	stop()
	if pe := produceFailure(res); pe != nil {
		ferr := t.failed(ctx, cl, p, next, pe, began, false)
		if !last && errors.Is(pe.err, kerr.OutOfOrderSequenceNumber) && !errors.As(ferr, new(*FencedError)) && !errors.Is(ferr, sinks.ErrPartitionLost) {
			t.drop(p, cl)
			return fmt.Errorf("%w: %w", errSequence, ferr)
		}
		return ferr
	}
	if err := t.commitOffsets(ctx, cl, cl, p, next); err != nil {
		return t.failed(ctx, cl, p, next, err, began, false)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		if err = t.failed(ctx, cl, p, next, err, began, true); err != nil {
			return err
		}
	} else if err := t.verifyCommitted(ctx, p, next); err != nil {
		t.drop(p, cl)
		t.markUnsure(p)
		return err
	}
	t.mu.Lock()
	t.committed[p] = max(t.committed[p], next)
	t.mu.Unlock()
	return nil
}

// verifyCommitted reads back the group's stable offset of p after an
// EndTransaction(TryCommit) that returned nil: an offset below next is
// errNotCommitted; one that cannot be read marks p unsure. Both are
// transient.
func (t *txnCommitter) verifyCommitted(ctx context.Context, p int32, next int64) error {
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	off, ok, err := t.stable(vctx, p)
	cancel()
	switch {
	case err != nil:
		t.markUnsure(p)
		return transientTxn(fmt.Errorf("kafka sink: transaction of %s to %s: committed, but the group's offset could not be read back to confirm it (the batch is written again; what committed is skipped): %w", t.id(p), t.where, err))
	case !ok || off < next:
		held := "no offset of this run"
		if ok {
			held = "offset " + strconv.FormatInt(off, 10)
		}
		return transientTxn(fmt.Errorf("kafka sink: transaction of %s to %s: %w: group %s holds %s for %s/%d, not %d (nothing of it is visible to read_committed consumers; the batch is written again)", t.id(p), t.where, errNotCommitted, t.group, held, t.topic, p, next))
	}
	return nil
}

// commitOffsets adds the group to the transaction (AddOffsetsToTxn) and
// commits next for p in it (TxnOffsetCommit) with the runner's commit
// metadata; the requests go through via.
func (t *txnCommitter) commitOffsets(ctx context.Context, cl, via *kgo.Client, p int32, next int64) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	id := t.id(p)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, t.group
	if err := t.retryRequest(ctx, "AddOffsetsToTxn of "+id, func() error {
		resp, err := add.RequestWith(ctx, via)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("add the offsets of group %s to the transaction: %w", t.group, err)
	}
	meta := t.meta(p)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, t.group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	if t.member != nil && t.onSource {
		req.Generation, req.MemberID = t.member()
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = t.topic, t.topicID
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, next, -1, &meta
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	err = t.retryRequest(ctx, "TxnOffsetCommit of "+id, func() error {
		resp, err := req.RequestWith(ctx, via)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit offset %d of %s/%d for group %s in the transaction: %w", next, t.topic, p, t.group, err)
	}
	return nil
}

func (t *txnCommitter) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, cl := range t.producers {
		cl.Close()
		delete(t.producers, p)
	}
	if t.adminCl != nil {
		t.adminCl.Close()
	}
}
