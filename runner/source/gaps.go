package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/source/wire"
)

// Gap is a span [From, To) of offsets of the window that were deleted
// (retention, DeleteRecords) before the replay read them.
type Gap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Len is the number of offsets in the gap (an upper bound on records).
func (g Gap) Len() int64 { return g.To - g.From }

func (g Gap) String() string { return fmt.Sprintf("[%d, %d)", g.From, g.To) }

// DataLossError reports offsets of the window that retention or
// DeleteRecords removed while the run was reading the partition: the read
// hit OFFSET_OUT_OF_RANGE below the new log start. It wraps
// ErrOffsetOutOfRange.
type DataLossError struct {
	Topic     string
	Partition int32
	// Lost are the offsets of the window that are gone; LogStart is the
	// partition's first offset now.
	Lost     Gap
	LogStart int64
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("OFFSET_OUT_OF_RANGE: offsets %s of the window (%d offsets) were deleted by retention or DeleteRecords before they were read; the log now starts at %d. Everything before offset %d is in the sink and committed. Re-run with allow_data_loss: true to skip the lost offsets (the report lists them)",
		e.Lost, e.Lost.Len(), e.LogStart, e.Lost.From)
}

func (e *DataLossError) Unwrap() error { return ErrOffsetOutOfRange }

// fetchError handles a failed fetch. OFFSET_OUT_OF_RANGE below the log
// start (from ListOffsets when the answer says -1) means records of the
// window were deleted: with allowLoss the reader moves to the log start and
// records the gap, else it is a *DataLossError.
func (r *Reader) fetchError(ctx context.Context, p *fetchPartition, err error) error {
	if p == nil || !errors.Is(kafka.Error(p.ErrorCode), kafka.OffsetOutOfRange) {
		return err
	}
	logStart := p.LogStartOffset
	if logStart < 0 {
		offs, lerr := r.c.ListOffsets(ctx, r.topic, []int32{r.partition}, plan.ReadUncommitted)
		if lerr != nil {
			return errors.Join(err, fmt.Errorf("the partition's log start offset: %w", lerr))
		}
		logStart = offs[r.partition].LogStart
	}
	if logStart <= r.next {
		return err
	}
	gap := Gap{From: r.next, To: min(logStart, r.end)}
	r.stats.Lost = append(r.stats.Lost, gap)
	if !r.allowLoss {
		return r.fail(&DataLossError{Topic: r.topic, Partition: r.partition, Lost: gap, LogStart: logStart})
	}
	r.log.Warn().Int64("lost_from", gap.From).Int64("lost_to", gap.To).Int64("log_start_offset", logStart).
		Msgf("offsets %s were deleted before they were read: skipped (allow_data_loss)", gap)
	r.next = gap.To
	r.stuck = 0
	return nil
}

// noProgress decides what a fetch that moved nothing means.
func (r *Reader) noProgress(ctx context.Context, p *fetchPartition) error {
	upper := p.HighWatermark // the end of what the broker serves us
	if r.isolation == 1 && p.LastStableOffset >= 0 {
		upper = min(upper, p.LastStableOffset)
	}
	if r.waitTxn && r.isolation == 1 && p.LastStableOffset >= 0 && p.LastStableOffset <= r.next && r.next < min(r.end, p.HighWatermark) {
		return r.openTransaction(ctx, p)
	}
	if p.HighWatermark <= r.next && r.next < r.end {
		return r.fail(fmt.Errorf("the partition's high watermark %d is below the resolved end %d: the log was truncated (unclean leader election?)", p.HighWatermark, r.end))
	}
	if base, ok := firstBatchBase(p); ok && upper > r.next {
		return r.skipCompactedTail(ctx, base, upper)
	}
	if upper > r.next && r.maxBytes < r.growLimit {
		// Data lies ahead but nothing came back: a batch larger than the
		// request from a broker that does not return oversized batches
		// (kafka-go drops a truncated batch). Grow instead of spinning.
		r.maxBytes = int32(min(2*int64(r.maxBytes), int64(r.growLimit)))
		r.log.Debug().Int32("max_bytes", r.maxBytes).Int64("offset", r.next).Msg("empty fetch below the high watermark: fetch size grown")
		return nil
	}
	if r.stuck++; r.stuck < noProgressLimit {
		return nil
	}
	if upper > r.next {
		return r.fail(fmt.Errorf("%d fetches of %d bytes at offset %d returned no record although the partition holds data up to offset %d: the record batch there is larger than replay's fetch limit of %d bytes, or the broker does not return oversized batches (KIP-74)", r.stuck, r.maxBytes, r.next, upper, r.growLimit))
	}
	return r.fail(fmt.Errorf("no progress after %d fetches (high watermark %d, last stable offset %d)", r.stuck, p.HighWatermark, p.LastStableOffset))
}

// skipCompactedTail handles a fetch whose first batch (at base) holds no
// record at or after next (compaction removed its last records; kafka-go
// hides the header's last offset). A fetch at x returns this batch while
// x is inside it, so a binary search finds its last offset, and next moves
// past it.
func (r *Reader) skipCompactedTail(ctx context.Context, base, upper int64) error {
	inside := func(x int64) (bool, error) {
		p, err := r.roundTrip(ctx, x)
		if p != nil {
			defer p.release()
		}
		if err != nil {
			return false, r.fetchError(ctx, p, err)
		}
		b, ok := firstBatchBase(p)
		return ok && b == base, nil
	}
	lo, hi := r.next, min(r.end, upper) // lo is inside; find the last offset inside below hi
	in, err := inside(hi - 1)
	if err != nil {
		return err
	}
	if in {
		lo = hi - 1
	}
	for hi--; hi-lo > 1; {
		mid := lo + (hi-lo)/2
		if in, err = inside(mid); err != nil {
			return err
		}
		if in {
			lo = mid
		} else {
			hi = mid
		}
	}
	r.log.Debug().Int64("from", r.next).Int64("to", lo+1).Int64("batch", base).Msg("compacted batch tail skipped")
	r.next, r.stuck = lo+1, 0
	return nil
}

// firstBatchBase returns the base offset of the first record batch of a
// fetch answer.
func firstBatchBase(p *fetchPartition) (int64, bool) {
	if p.legacy == nil {
		b, _, ok, err := wire.NextBatch(p.RecordBatches)
		return b.Base, ok && err == nil
	}
	if bs := legacyBatches(p.legacy.Records); len(bs) > 0 {
		return batchBase(bs[0])
	}
	return 0, false
}

// legacyBatches are the batches of a legacy record set.
func legacyBatches(rs protocol.RecordReader) []protocol.RecordReader {
	switch rs := rs.(type) {
	case nil:
		return nil
	case *protocol.RecordStream:
		return rs.Records
	}
	return []protocol.RecordReader{rs}
}

// batchBase is the base offset of a v2 record batch (data or control).
func batchBase(b protocol.RecordReader) (int64, bool) {
	switch b := b.(type) {
	case *protocol.RecordBatch:
		return b.BaseOffset, true
	case *protocol.ControlBatch:
		return b.BaseOffset, true
	}
	return 0, false
}

// OpenTransactionError reports a partition whose range ends past its last
// stable offset (KIP-98) and whose last stable offset did not move for the
// open-transaction timeout: a transaction is open there (a stuck or slow
// producer), and read_committed reading cannot pass it until it commits or
// aborts. Everything below LastStable was read.
type OpenTransactionError struct {
	Topic     string
	Partition int32
	// LastStable is the partition's last stable offset, HighWatermark its
	// high watermark, End the range end; LastStable < End <= HighWatermark
	// or End > HighWatermark > LastStable.
	LastStable, HighWatermark, End int64
	// Waited is how long the reader waited at LastStable; Timeout is
	// source.open_transaction_timeout.
	Waited, Timeout time.Duration
	// Producers are the producers with a transaction open on the partition,
	// where the broker tells them (DescribeProducers); none when it does not.
	Producers []Producer
}

func (e *OpenTransactionError) Error() string {
	who := ""
	if len(e.Producers) > 0 {
		names := make([]string, len(e.Producers))
		for i, p := range e.Producers {
			names[i] = p.String()
		}
		who = " (" + strings.Join(names, "; ") + ")"
	}
	return fmt.Sprintf("an open transaction%s holds the last stable offset of %s/%d at %d, below the range end %d (high watermark %d): waited %s (source.open_transaction_timeout %s) and it is still open. The committed records after it cannot be read under read_committed until the transaction commits or aborts (the broker aborts it after the producer's transaction.timeout.ms). Everything before offset %d is in the sink and committed",
		who, e.Topic, e.Partition, e.LastStable, e.End, e.HighWatermark, e.Waited.Round(time.Millisecond), e.Timeout, e.LastStable)
}

// openTransaction handles a fetch that returned nothing because the
// reader reached the partition's last stable offset below the range end:
// it waits (returns nil) while the last stable offset stood at the
// reader's position for less than the timeout, and fails with an
// *OpenTransactionError after that.
func (r *Reader) openTransaction(ctx context.Context, p *fetchPartition) error {
	now := time.Now()
	r.stuck = 0
	if r.blockedAt != r.next {
		r.blockedAt, r.blockedSince = r.next, now
		ev := r.log.Warn().Int64("last_stable_offset", p.LastStableOffset).Int64("high_watermark", p.HighWatermark).Int64("end", r.end).Dur("timeout", r.txnTimeout)
		if ps := r.producers(ctx); len(ps) > 0 {
			ev = ev.Str("producer", ps[0].String())
		}
		ev.Msgf("an open transaction holds the partition at its last stable offset %d, below the range end %d: the records before it are delivered; waiting up to %s (source.open_transaction_timeout) for the transaction to end", p.LastStableOffset, r.end, r.txnTimeout)
	}
	if waited := now.Sub(r.blockedSince); waited >= r.txnTimeout {
		return r.fail(&OpenTransactionError{Topic: r.topic, Partition: r.partition,
			LastStable: p.LastStableOffset, HighWatermark: p.HighWatermark, End: r.end, Waited: waited, Timeout: r.txnTimeout, Producers: r.producers(ctx)})
	}
	// A broker holds such a fetch for MaxWaitTime; one that answers at
	// once is not asked again at once.
	t := time.NewTimer(min(100*time.Millisecond, r.txnTimeout-now.Sub(r.blockedSince)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// producers asks which producers hold a transaction open on the partition,
// for messages: a failure gives none.
func (r *Reader) producers(ctx context.Context) []Producer {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ps, err := r.c.OpenProducers(ctx, r.topic, r.partition)
	if err != nil {
		r.log.Debug().Err(err).Msg("describe the producers of the open transaction")
	}
	return ps
}
