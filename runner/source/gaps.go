package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
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
// start means records of the window were deleted under the reader: with
// allowLoss it moves to the new log start, records the gap and returns nil;
// otherwise it is a *DataLossError naming the lost offsets.
func (r *Reader) fetchError(p *fetch.ResponsePartition, err error) error {
	if p == nil || !errors.Is(kafka.Error(p.ErrorCode), kafka.OffsetOutOfRange) || p.LogStartOffset <= r.next {
		return err
	}
	gap := Gap{From: r.next, To: min(p.LogStartOffset, r.end)}
	r.stats.Lost = append(r.stats.Lost, gap)
	if !r.allowLoss {
		return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next,
			Err: &DataLossError{Topic: r.topic, Partition: r.partition, Lost: gap, LogStart: p.LogStartOffset}}
	}
	r.log.Warn().Int64("lost_from", gap.From).Int64("lost_to", gap.To).Int64("log_start_offset", p.LogStartOffset).
		Msgf("offsets %s were deleted before they were read: skipped (allow_data_loss)", gap)
	r.next = gap.To
	r.stuck = 0
	return nil
}

// noProgress decides what a fetch that moved nothing means.
func (r *Reader) noProgress(ctx context.Context, p *fetch.ResponsePartition) error {
	upper := p.HighWatermark // the end of what the broker serves us
	if r.isolation == 1 && p.LastStableOffset >= 0 {
		upper = min(upper, p.LastStableOffset)
	}
	if p.HighWatermark <= r.next && r.next < r.end {
		return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next,
			Err: fmt.Errorf("the partition's high watermark %d is below the resolved end %d: the log was truncated (unclean leader election?)", p.HighWatermark, r.end)}
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
		return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next,
			Err: fmt.Errorf("%d fetches of %d bytes at offset %d returned no record although the partition holds data up to offset %d: the record batch there is larger than replay's fetch limit of %d bytes, or the broker does not return oversized batches (KIP-74)", r.stuck, r.maxBytes, r.next, upper, r.growLimit)}
	}
	return &PartitionError{Topic: r.topic, Partition: r.partition, Offset: r.next,
		Err: fmt.Errorf("no progress after %d fetches (high watermark %d, last stable offset %d)", r.stuck, p.HighWatermark, p.LastStableOffset)}
}

// skipCompactedTail handles a fetch whose first batch (at base) holds no
// record at or after next: compaction removed the batch's last records,
// and Kafka keeps the batch's header, whose last offset kafka-go does not
// expose. A broker answers a fetch at x with the first batch whose last
// offset is >= x, so a probe at x returns this batch exactly while x is
// inside it: a binary search finds the batch's last offset, and next moves
// past it (the offsets in between have no record). Always moves next.
func (r *Reader) skipCompactedTail(ctx context.Context, base, upper int64) error {
	inside := func(x int64) (bool, error) {
		p, err := r.roundTrip(ctx, x)
		if err != nil {
			return false, r.fetchError(p, err)
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
func firstBatchBase(p *fetch.ResponsePartition) (int64, bool) {
	switch rs := p.RecordSet.Records.(type) {
	case nil:
		return 0, false
	case *protocol.RecordStream:
		if len(rs.Records) == 0 {
			return 0, false
		}
		return batchBase(rs.Records[0])
	default:
		return batchBase(rs)
	}
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
