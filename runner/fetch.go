package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Fetch sizes. A response holds whole record batches and kafka-go decodes
// each into its own 64 KiB pages, so memory follows the number of batches
// per response: the request size adapts to about 32 batches of the size seen
// so far, within [minFetchBytes, maxFetchBytes].
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
	// returns nothing although data lies ahead (a record batch larger than
	// the request, from a broker that does not return oversized batches,
	// KIP-74). Kafka's message.max.bytes defaults to 1 MiB; 64 MiB is above
	// any sane topic setting.
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

// fetchStats counts what a reader passed over.
type fetchStats struct {
	aborted int64 // records of aborted transactions dropped (read_committed)
	control int64 // transaction markers skipped
	lost    []Gap // offsets deleted by retention before they were read
}

// partitionReader reads [next, end) of one partition with protocol-level
// Fetch requests through the cluster's Transport (KAFKA-GO.md §2, §6): it
// sees control batches and aborted-transaction lists, so it can drop
// aborted data under read_committed, skip markers, and tell exactly when the
// range is done. OFFSET_OUT_OF_RANGE is an error, never a silent jump: with
// allowLoss (allow_data_loss) the reader skips to the new log start and
// records the gap in stats.lost.
type partitionReader struct {
	c         *Cluster
	topic     string
	partition int32
	isolation int8 // 0 read_uncommitted, 1 read_committed
	next, end int64
	maxBytes  int32
	batchAvg  float64 // moving average of record batch sizes in bytes
	stats     fetchStats
	stuck     int
	// allowLoss skips offsets deleted under the reader (allow_data_loss)
	// instead of failing; growLimit bounds the fetch size (maxGrowFetchBytes).
	allowLoss bool
	growLimit int32
	log       zerolog.Logger
	arena     arena
}

func newPartitionReader(c *Cluster, topic string, partition int32, iso string, start, end int64) *partitionReader {
	var level int8
	if isolationLevel(iso) == kafka.ReadCommitted {
		level = 1
	}
	return &partitionReader{c: c, topic: topic, partition: partition, isolation: level, next: start, end: end, maxBytes: minFetchBytes,
		growLimit: maxGrowFetchBytes, log: zerolog.Nop()}
}

// done reports whether the range is finished: offsets may have gaps, so
// done means the next offset to read is at or past the end.
func (r *partitionReader) done() bool { return r.next >= r.end }

// fetch performs one Fetch and appends the records in [next, end) to out,
// advancing next past everything it consumed (records, markers, aborted data).
func (r *partitionReader) fetch(ctx context.Context, out []record.Record) ([]record.Record, error) {
	p, err := r.roundTrip(ctx, r.next)
	if err != nil {
		return out, r.fetchError(p, err)
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
func (r *partitionReader) roundTrip(ctx context.Context, offset int64) (*fetch.ResponsePartition, error) {
	req := &fetch.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(fetchMaxWait / time.Millisecond),
		MinBytes:       1,
		MaxBytes:       r.maxBytes,
		IsolationLevel: r.isolation,
		SessionEpoch:   -1, // no fetch session (KIP-227)
		Topics: []fetch.RequestTopic{{Topic: r.topic, Partitions: []fetch.RequestPartition{{
			Partition: r.partition, CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1, PartitionMaxBytes: r.maxBytes,
		}}}},
	}
	m, err := r.c.fetchTransport(r.partition).RoundTrip(ctx, r.c.addr(), req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", r.topic, r.partition, offset, err)
	}
	resp, ok := m.(*fetch.Response)
	if !ok {
		return nil, fmt.Errorf("fetch %s/%d: unexpected response %T", r.topic, r.partition, m)
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", r.topic, r.partition, offset, kafka.Error(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if t.Topic != r.topic || p.Partition != r.partition {
				continue
			}
			if p.ErrorCode != 0 {
				return p, r.partitionError(p)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("fetch %s/%d: the response does not mention the partition", r.topic, r.partition)
}

func (r *partitionReader) partitionError(p *fetch.ResponsePartition) error {
	kerr := kafka.Error(p.ErrorCode)
	if errors.Is(kerr, kafka.OffsetOutOfRange) {
		return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next,
			Err: fmt.Errorf("%w: offset %d is no longer available (log start offset %d, high watermark %d): retention or DeleteRecords removed records of the window while it was being read; the replay does not jump over lost data", kerr, r.next, p.LogStartOffset, p.HighWatermark)}
	}
	return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next, Err: kerr}
}

// consume walks the record batches of one response.
func (r *partitionReader) consume(p *fetch.ResponsePartition, out []record.Record) ([]record.Record, error) {
	if p.RecordSet.Records == nil {
		return out, nil
	}
	aborted := slices.Clone(p.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b fetch.ResponseTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	abortedProducers := map[int64]bool{}
	var batches []protocol.RecordReader
	if rs, ok := p.RecordSet.Records.(*protocol.RecordStream); ok {
		batches = rs.Records
	} else {
		batches = []protocol.RecordReader{p.RecordSet.Records}
	}
	var size int
	for _, b := range batches {
		if base, ok := batchBase(b); ok && base > r.next {
			// No batch holds [next, base): a hole left by compaction.
			r.next = min(base, max(r.end, r.next))
		}
		if r.done() {
			break
		}
		var err error
		switch b := b.(type) {
		case *protocol.ControlBatch:
			err = r.controlBatch(b, abortedProducers)
		case *protocol.RecordBatch:
			for len(aborted) > 0 && aborted[0].FirstOffset <= b.BaseOffset {
				abortedProducers[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			drop := r.isolation == 1 && b.Attributes.Transactional() && abortedProducers[b.ProducerID]
			out, size, err = r.records(b, out, drop, size)
		default:
			out, size, err = r.records(b, out, false, size)
		}
		if err != nil {
			return out, &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next, Err: fmt.Errorf("decode record batch: %w", err)}
		}
	}
	r.adapt(size, len(batches))
	return out, nil
}

// controlBatch skips a transaction marker; an ABORT marker closes its
// producer's aborted range.
func (r *partitionReader) controlBatch(b *protocol.ControlBatch, abortedProducers map[int64]bool) error {
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
			delete(abortedProducers, b.ProducerID)
		}
		r.stats.control++
		r.next = min(cr.Offset+1, max(r.end, r.next))
	}
}

func (r *partitionReader) records(b protocol.RecordReader, out []record.Record, drop bool, size int) ([]record.Record, int, error) {
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
			// Offsets are increasing: seeing one at or past the end proves
			// nothing else lies in [next, end) (compacted away), so the
			// range is done.
			r.next = max(r.next, r.end)
			closeRecord(rec)
			continue
		}
		r.next = rec.Offset + 1
		if drop {
			r.stats.aborted++
			closeRecord(rec)
			continue
		}
		sr, n, err := r.arena.copyRecord(r.topic, r.partition, rec)
		if err != nil {
			return out, size, err
		}
		size += n
		out = append(out, sr)
	}
}

// adapt sizes the next request to about batchesPerFetch batches.
func (r *partitionReader) adapt(bytes, batches int) {
	if batches == 0 || bytes == 0 {
		return
	}
	avg := float64(bytes) / float64(batches)
	if r.batchAvg == 0 {
		r.batchAvg = avg
	} else {
		r.batchAvg = 0.8*r.batchAvg + 0.2*avg
	}
	r.maxBytes = int32(min(max(r.batchAvg*batchesPerFetch, minFetchBytes), maxFetchBytes))
}

// arena hands out the byte slices of copied records from shared chunks:
// one allocation per chunk instead of two per record on the hot path. A
// chunk lives as long as any record cut from it, unless it is recycled:
// detach hands over the chunks cut since the last call, and whoever holds
// the records gives them back through free once no record cut from them is
// used any more (the prefetcher's worker, after the sink wrote them).
type arena struct {
	buf  []byte
	used [][]byte    // chunks cut from since the last detach
	free chan []byte // recycled chunks; nil: none
	// hdrs is a slab the records' header slices are cut from: one
	// allocation per headerSlab headers instead of one per record.
	hdrs []record.Header
}

const headerSlab = 256

const arenaChunk = 64 << 10

// detach returns the chunks cut from since the last call and starts the
// next record in a new chunk, so that no chunk is shared between two
// callers of detach.
func (a *arena) detach() [][]byte {
	used := a.used
	a.used, a.buf = nil, nil
	return used
}

// chunk returns a recycled chunk, or a new one.
func (a *arena) chunk() []byte {
	select {
	case c := <-a.free:
		return c
	default:
		return make([]byte, arenaChunk)
	}
}

// take returns a slice of n bytes (nil for a null key or value: n < 0).
func (a *arena) take(n int) []byte {
	if n < 0 {
		return nil
	}
	if n == 0 {
		return []byte{} // empty, not null
	}
	if n > len(a.buf) {
		if n > arenaChunk/4 {
			return make([]byte, n)
		}
		a.buf = a.chunk()
		a.used = append(a.used, a.buf)
	}
	s := a.buf[:n:n]
	a.buf = a.buf[n:]
	return s
}

func (a *arena) read(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	s := a.take(b.Len())
	_, err := io.ReadFull(b, s)
	return s, err
}

// copyRecord copies rec out of kafka-go's pooled pages into a record.Record
// and returns its size in bytes (key, value and headers).
func (a *arena) copyRecord(topic string, partition int32, rec *protocol.Record) (record.Record, int, error) {
	defer closeRecord(rec)
	key, err := a.read(rec.Key)
	if err != nil {
		return record.Record{}, 0, err
	}
	val, err := a.read(rec.Value)
	if err != nil {
		return record.Record{}, 0, err
	}
	n := len(key) + len(val)
	var hs []record.Header
	if n := len(rec.Headers); n > 0 {
		if len(a.hdrs) < n {
			a.hdrs = make([]record.Header, max(n, headerSlab))
		}
		hs, a.hdrs = a.hdrs[:n:n], a.hdrs[n:]
		for i, h := range rec.Headers {
			v := a.take(len(h.Value))
			copy(v, h.Value)
			if h.Value == nil {
				v = nil
			}
			hs[i] = record.Header{Key: h.Key, Value: v}
			n += len(h.Key) + len(h.Value)
		}
	}
	return record.Record{Topic: topic, Partition: partition, Offset: rec.Offset, Time: rec.Time, Key: key, Value: val, Headers: hs}, n, nil
}

func closeRecord(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}

// firstRecordTime returns the timestamp of the first record at or after
// offset (the zero time when the partition has none).
func (c *Cluster) firstRecordTime(ctx context.Context, topic string, partition int32, offset int64, iso string) (time.Time, error) {
	r := newPartitionReader(c, topic, partition, iso, offset, offset+1<<20)
	for i := 0; i < 5; i++ {
		recs, err := r.fetch(ctx, nil)
		if err != nil {
			return time.Time{}, err
		}
		if len(recs) > 0 {
			return recs[0].Time, nil
		}
	}
	return time.Time{}, nil
}
