package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source/wire"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Fetch sizes: a request asks for about batchesPerFetch batches of the
// size seen so far, within [minFetchBytes, maxFetchBytes].
const (
	minFetchBytes   = 64 << 10
	maxFetchBytes   = 256 << 10
	batchesPerFetch = 32
	fetchMaxWait    = 500 * time.Millisecond
	// noProgressLimit is how many fetches in a row may return nothing new
	// while the partition holds data past our position before the reader
	// gives up (a stuck partition is an error, never a silent hang).
	noProgressLimit = 20
	// maxGrowFetchBytes bounds how far the fetch size grows when a fetch
	// returns nothing although data lies ahead (a batch larger than the
	// request, KIP-74): above any sane message.max.bytes (default 1 MiB).
	maxGrowFetchBytes = 64 << 20
)

// PartitionError is a failure of one partition, with the offset the
// partition had reached (everything before it is durable in the sink).
type PartitionError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("partition %s/%d at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// fail is err as a *PartitionError at the reader's position.
func (r *Reader) fail(err error) error {
	return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next, Err: err}
}

// Stats counts what a reader passed over.
type Stats struct {
	// Aborted counts records of aborted transactions dropped (read_committed).
	Aborted int64
	// Control counts transaction markers skipped.
	Control int64
	// Lost are offsets deleted by retention before they were read.
	Lost []Gap
}

// ReaderConfig is what a Reader reads.
type ReaderConfig struct {
	Topic     string
	Partition int32
	// Isolation is plan.ReadCommitted or plan.ReadUncommitted.
	Isolation string
	// Start and End bound the range [Start, End) to read.
	Start, End int64
	// AllowLoss skips offsets deleted under the reader (allow_data_loss)
	// instead of failing with a *DataLossError.
	AllowLoss bool
	// Log receives the reader's warnings and debug messages; zerolog.Nop()
	// when unset.
	Log *zerolog.Logger
	// WaitOpenTransactions, under read_committed, makes a reader that
	// reached the partition's last stable offset below End (a transaction
	// is open there, KIP-98) wait for it to move, for up to
	// OpenTransactionTimeout at one offset: then Fetch fails with an
	// *OpenTransactionError (0 fails at the first such fetch). Without it,
	// such fetches count as fetches without progress.
	WaitOpenTransactions   bool
	OpenTransactionTimeout time.Duration
}

// Reader reads [Start, End) of one partition with protocol-level Fetch
// requests through the cluster's transport: it sees control batches and
// aborted-transaction lists, so it can drop aborted data under
// read_committed, skip markers, and tell exactly when the range is done.
// OFFSET_OUT_OF_RANGE is an error, never a silent jump: with AllowLoss the
// reader skips to the new log start and records the gap in its Stats. A
// Reader is used by one goroutine at a time.
type Reader struct {
	c         *Cluster
	topic     string
	partition int32
	isolation int8 // 0 read_uncommitted, 1 read_committed
	next, end int64
	maxBytes  int32
	batchAvg  float64 // moving average of record batch sizes in bytes
	// ratio averages the record bytes a fetched byte decodes to (fetchReserve).
	ratio float64
	stats Stats
	stuck int
	// allowLoss skips offsets deleted under the reader (allow_data_loss)
	// instead of failing; growLimit bounds the fetch size (maxGrowFetchBytes).
	allowLoss bool
	growLimit int32
	log       zerolog.Logger
	arena     wire.Arena
	// blockedAt is where an open transaction holds the reader since
	// blockedSince (-1: none).
	waitTxn      bool
	txnTimeout   time.Duration
	blockedAt    int64
	blockedSince time.Time
}

// NewReader returns a reader of cfg's range; it sends nothing until Fetch.
func (c *Cluster) NewReader(cfg ReaderConfig) *Reader {
	log := zerolog.Nop()
	if cfg.Log != nil {
		log = *cfg.Log
	}
	return &Reader{c: c, topic: cfg.Topic, partition: cfg.Partition, isolation: isolationLevel(cfg.Isolation), next: cfg.Start, end: cfg.End, maxBytes: minFetchBytes,
		allowLoss: cfg.AllowLoss, growLimit: maxGrowFetchBytes, log: log,
		waitTxn: cfg.WaitOpenTransactions, txnTimeout: cfg.OpenTransactionTimeout, blockedAt: -1}
}

// Done reports whether the range is finished: offsets may have gaps, so
// done means the next offset to read is at or past the end.
func (r *Reader) Done() bool { return r.next >= r.end }

// Stats returns what the reader passed over so far.
func (r *Reader) Stats() Stats { return r.stats }

// Fetch performs one Fetch and appends the records in [Next, End) to out,
// advancing Next past everything it consumed (records, markers, aborted
// data). The records' bytes are the reader's (see Prefetch for recycling
// them); a failure is a *PartitionError.
func (r *Reader) Fetch(ctx context.Context, out []record.Record) ([]record.Record, error) {
	// A token for the request on the wire, taken outside call: waiting for
	// it is not part of an attempt's deadline.
	inFlight := r.c.memory().inFlight
	select {
	case inFlight <- struct{}{}:
	case <-ctx.Done():
		return out, r.fail(ctx.Err())
	}
	p, err := r.roundTrip(ctx, r.next)
	<-inFlight
	if p != nil {
		defer p.release()
	}
	if err != nil {
		return out, r.fetchError(ctx, p, err)
	}
	before := r.next
	out, err = r.consume(p, out)
	if err != nil {
		return out, err
	}
	if r.next > before {
		r.stuck = 0
		return out, nil
	}
	return out, r.noProgress(ctx, p)
}

// roundTrip fetches from offset. A partition-level error comes back with
// the partition's answer (log start offset, high watermark).
func (r *Reader) roundTrip(ctx context.Context, offset int64) (*fetchPartition, error) {
	req := fetchExchange{Request: fetch.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(fetchMaxWait / time.Millisecond),
		MinBytes:       1,
		MaxBytes:       r.maxBytes,
		IsolationLevel: r.isolation,
		SessionEpoch:   -1, // no fetch session (KIP-227)
		Topics: []fetch.RequestTopic{{Topic: r.topic, Partitions: []fetch.RequestPartition{{
			Partition: r.partition, CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1, PartitionMaxBytes: r.maxBytes,
		}}}},
	}}
	part, err := call(ctx, r.c, opFetch, func(ctx context.Context) (*fetchPartition, error) {
		var part *fetchPartition
		tr := r.c.fetchTransport(r.partition)
		// Each attempt sends its own exchange: one that timed out may still
		// run on the transport's connection goroutine, reading its fields.
		ex := &fetchExchange{Request: req.Request, clientID: tr.ClientID}
		m, err := tr.RoundTrip(ctx, r.c.conn.Addr(), ex)
		if err == nil {
			part, err = r.answer(m)
		}
		if err == nil && part.ErrorCode != 0 && retriable(kafka.Error(part.ErrorCode)) {
			err = kafka.Error(part.ErrorCode) // a leader moving: call retries
		}
		if err != nil && retriable(explainRouting(err)) {
			tr.CloseIdleConnections() // the retry dials anew, with fresh metadata
		}
		return part, err
	})
	if err != nil {
		var re *RetryError
		if !errors.As(err, &re) {
			err = fmt.Errorf("fetch: %w", err)
		}
		if re != nil || part == nil {
			return nil, r.fail(err)
		}
	}
	if part.ErrorCode != 0 {
		var kerr error = kafka.Error(part.ErrorCode)
		if errors.Is(kerr, kafka.OffsetOutOfRange) {
			kerr = fmt.Errorf("%w: offset %d is no longer available (log start offset %d, high watermark %d): retention or DeleteRecords removed records of the window while it was being read; the replay does not jump over lost data", kerr, r.next, part.LogStartOffset, part.HighWatermark)
		}
		return part, r.fail(kerr)
	}
	return part, nil
}

// answer finds the partition in a fetch response; a top-level error code
// comes back as a kafka.Error.
func (r *Reader) answer(m protocol.Message) (*fetchPartition, error) {
	p, ok := m.(*fetchPartition)
	if !ok {
		return nil, fmt.Errorf("unexpected response %T", m)
	}
	if p.topError != 0 {
		p.release()
		return nil, kafka.Error(p.topError)
	}
	if !p.found {
		return nil, errors.New("the response does not mention the partition")
	}
	return p, nil
}

// consume walks the record batches of one response.
func (r *Reader) consume(p *fetchPartition, out []record.Record) ([]record.Record, error) {
	if p.legacy == nil {
		return r.consumeV2(p, out)
	}
	aborted := wire.NewAborted(r.isolation == 1, p.AbortedTransactions)
	batches := legacyBatches(p.legacy.Records)
	var size int
	for _, b := range batches {
		base, v2 := batchBase(b)
		if v2 && base > r.next {
			// No batch holds [next, base): a hole left by compaction.
			r.next = min(base, max(r.end, r.next))
		}
		if r.Done() {
			break
		}
		var err error
		if v2 {
			// kafka-go keeps no batch's last offset: a transaction starts
			// at a batch's base offset, and a marker batch holds one record.
			aborted.UpTo(base)
		}
		switch b := b.(type) {
		case *protocol.ControlBatch:
			err = r.controlBatch(b, aborted)
		case *protocol.RecordBatch:
			drop := aborted.Drop(b.Attributes.Transactional(), b.ProducerID)
			stamp := stampCreateTime
			if b.Attributes&wire.AttrLogAppendTime != 0 {
				i := slices.IndexFunc(p.appendTimes, func(t wire.BatchTime) bool { return t.Base == b.BaseOffset })
				if i < 0 {
					err = fmt.Errorf("the LOG_APPEND_TIME batch at offset %d has no MaxTimestamp", b.BaseOffset)
					break
				}
				stamp = p.appendTimes[i].MaxTimestamp
			}
			out, size, err = r.records(b, out, drop, stamp, size)
		default:
			out, size, err = r.records(b, out, false, stampCreateTime, size)
		}
		if err != nil {
			return out, r.fail(fmt.Errorf("decode record batch: %w", err))
		}
	}
	r.adapt(size, len(batches))
	return out, nil
}

// consumeV2 walks the record batches of a record set of magic 2 in place
// (the wire package).
func (r *Reader) consumeV2(p *fetchPartition, out []record.Record) ([]record.Record, error) {
	set := p.RecordBatches
	aborted := wire.NewAborted(r.isolation == 1, p.AbortedTransactions)
	// Grown once, to what the batches declare, not doubled from empty.
	out = slices.Grow(out, min(wire.RecordCount(set), 1<<16))
	var size, batches int
	for !r.Done() {
		b, rest, ok, err := wire.NextBatch(set)
		if err != nil {
			return out, r.fail(fmt.Errorf("decode record batch: %w", err))
		}
		if !ok {
			break
		}
		set = rest
		batches++
		if b.Base > r.next {
			// No batch holds [next, base): a hole left by compaction.
			r.next = min(b.Base, max(r.end, r.next))
			if r.Done() {
				break
			}
		}
		if b.Last() < r.next {
			continue // whole batches come back: this one was read before
		}
		aborted.UpTo(b.Last())
		if b.Control() {
			err = r.controlV2(&b, aborted)
		} else {
			drop := aborted.Drop(b.Transactional(), b.ProducerID)
			out, size, err = r.recordsV2(&b, out, drop, size)
		}
		if err != nil {
			return out, r.fail(fmt.Errorf("decode record batch: %w", err))
		}
		// The batch's offsets after its last record (compaction removed
		// them; the header keeps the last offset) hold nothing either.
		r.next = max(r.next, min(b.Last()+1, max(r.end, r.next)))
	}
	r.adapt(size, batches)
	if fetched := len(p.RecordBatches); fetched > 0 && size > 0 {
		r.ratio = ewma(r.ratio, float64(size)/float64(fetched))
	}
	return out, nil
}

// controlV2 skips a transaction marker; an ABORT marker closes its
// producer's aborted range.
func (r *Reader) controlV2(b *wire.Batch, aborted *wire.Aborted) error {
	data := b.Records // control batches are never compressed
	for len(data) > 0 {
		rec, rest, err := wire.NextRecord(b, data)
		if err != nil {
			return err
		}
		data = rest
		if rec.Offset < r.next {
			continue
		}
		typ, err := wire.ControlType(rec.Key)
		if err != nil {
			return err
		}
		if typ == wire.ControlAbort {
			aborted.Ended(b.ProducerID)
		}
		r.stats.Control++
		r.next = min(rec.Offset+1, max(r.end, r.next))
	}
	return nil
}

// recordsV2 appends b's records in [next, end), copied into the arena.
// Records of a LOG_APPEND_TIME batch all carry its MaxTimestamp (KIP-32).
func (r *Reader) recordsV2(b *wire.Batch, out []record.Record, drop bool, size int) ([]record.Record, int, error) {
	data := b.Records
	if b.Attrs&wire.AttrCompression != 0 {
		buf := wire.DecodeBuffers.Get()
		defer wire.DecodeBuffers.Put(buf)
		var err error
		if data, err = b.Decompress(buf); err != nil {
			return out, size, err
		}
	}
	appendTime := b.LogAppendTime()
	for i := int32(0); i < b.Count && len(data) > 0; i++ {
		rec, rest, err := wire.NextRecord(b, data)
		if err != nil {
			return out, size, err
		}
		data = rest
		if rec.Offset < r.next { // whole batches come back
			continue
		}
		if rec.Offset >= r.end {
			// Offsets are increasing: nothing else lies in [next, end).
			r.next = max(r.next, r.end)
			break
		}
		r.next = rec.Offset + 1
		if drop {
			r.stats.Aborted++
			continue
		}
		if appendTime {
			rec.Time = b.MaxTime
		}
		sr, n, err := r.arena.Copy(r.topic, r.partition, &rec)
		if err != nil {
			return out, size, err
		}
		if appendTime {
			sr.TimestampType = record.LogAppendTime
		}
		size += n
		out = append(out, sr)
	}
	return out, size, nil
}

// stampCreateTime is records' stamp argument for a CreateTime batch.
const stampCreateTime int64 = -1 << 63

// controlBatch skips a transaction marker; an ABORT marker closes its
// producer's aborted range.
func (r *Reader) controlBatch(b *protocol.ControlBatch, aborted *wire.Aborted) error {
	for {
		cr, err := b.ReadControlRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if cr.Offset < r.next {
			continue
		}
		if cr.Type == 0 { // ABORT
			aborted.Ended(b.ProducerID)
		}
		r.stats.Control++
		r.next = min(cr.Offset+1, max(r.end, r.next))
	}
}

// records appends b's records in [next, end). stamp is the batch's
// MaxTimestamp (ms) when it is a LOG_APPEND_TIME batch, whose records all
// carry it (KIP-32), else stampCreateTime.
func (r *Reader) records(b protocol.RecordReader, out []record.Record, drop bool, stamp int64, size int) ([]record.Record, int, error) {
	for {
		rec, err := b.ReadRecord()
		if errors.Is(err, io.EOF) {
			return out, size, nil
		}
		if err != nil {
			return out, size, err
		}
		if rec.Offset < r.next { // whole batches come back
			closeRecord(rec)
			continue
		}
		if rec.Offset >= r.end {
			// Offsets are increasing: nothing else lies in [next, end).
			r.next = max(r.next, r.end)
			closeRecord(rec)
			continue
		}
		r.next = rec.Offset + 1
		if drop {
			r.stats.Aborted++
			closeRecord(rec)
			continue
		}
		sr, n, err := copyRecord(&r.arena, r.topic, r.partition, rec)
		if err != nil {
			return out, size, err
		}
		if stamp != stampCreateTime {
			sr.Time, sr.TimestampType = time.UnixMilli(stamp), record.LogAppendTime
		}
		size += n
		out = append(out, sr)
	}
}

// adapt sizes the next request to about batchesPerFetch batches.
func (r *Reader) adapt(bytes, batches int) {
	if batches == 0 || bytes == 0 {
		return
	}
	r.batchAvg = ewma(r.batchAvg, float64(bytes)/float64(batches))
	r.maxBytes = int32(min(max(r.batchAvg*batchesPerFetch, minFetchBytes), maxFetchBytes))
}

// ewma moves the average avg (0: none yet) a fifth of the way to v.
func ewma(avg, v float64) float64 {
	if avg == 0 {
		return v
	}
	return 0.8*avg + 0.2*v
}
