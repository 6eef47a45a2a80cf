package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// visibleWindow is the first stretch of a target partition, back from its
// last stable offset, that visibleRecord reads; each next one is ten times
// longer, back to the log start offset.
const visibleWindow = 1000

// visibleIdle is how long a read of a stretch waits for more records
// before it takes the stretch as read (offsets a compaction removed from
// its end never come).
const visibleIdle = 5 * time.Second

// visibleRecord finds a record of the forgotten transaction h (its
// producer id and epoch) that read_committed consumers see on one of the
// target partitions parts (those where h's producer wrote), with a source
// offset (the replay-source-offset header) at or past from: the
// transaction's commit was marked there, though not on the offsets topic.
// It returns where it found one ("" for none) and its source offset. Each
// partition is read back from its last stable offset, stretch by stretch,
// until the stretch that holds the producer's last visible record.
func (t *txnCommitter) visibleRecord(ctx context.Context, h hangingTxn, parts []int32, from int64) (string, int64, error) {
	starts, err := t.admin.ListStartOffsets(ctx, t.target)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return "", 0, err
	}
	stable, err := t.admin.ListCommittedOffsets(ctx, t.target)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return "", 0, err
	}
	for _, part := range parts {
		lo, _ := starts.Lookup(t.target, part)
		hi, _ := stable.Lookup(t.target, part)
		for window := int64(visibleWindow); hi.Offset > lo.Offset; window *= 10 {
			at := max(lo.Offset, hi.Offset-window)
			last, err := t.lastOfProducer(ctx, part, h.pr.ProducerID, at, hi.Offset)
			if err != nil {
				return "", 0, err
			}
			if last != nil {
				if src := sourceOffset(last); last.ProducerEpoch == h.pr.ProducerEpoch && src >= from {
					return fmt.Sprintf("%s/%d offset %d", t.target, part, last.Offset), src, nil
				}
				break
			}
			hi.Offset = at
		}
	}
	return "", -1, nil
}

// lastOfProducer reads target partition part from offset at to end
// (read_committed, control records kept so that the reading reaches end)
// and returns the last record of producer pid in it, nil when it has none.
func (t *txnCommitter) lastOfProducer(ctx context.Context, part int32, pid, at, end int64) (*kgo.Record, error) {
	cl, err := kgo.NewClient(append(slices.Clip(t.base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.target: {part: kgo.NewOffset().At(at)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var last *kgo.Record
	for {
		pctx, cancel := context.WithTimeout(ctx, visibleIdle)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return nil, e.Err
			}
		}
		if fs.NumRecords() == 0 {
			return last, nil // idle: the stretch's end was compacted away
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end {
				done = true
				return
			}
			if r.ProducerID == pid && !r.Attrs.IsControl() {
				last = r
			}
			done = done || r.Offset == end-1
		})
		if done {
			return last, nil
		}
	}
}

// sourceOffset is r's replay-source-offset header, -1 when it has none.
func sourceOffset(r *kgo.Record) int64 {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == HeaderSourceOffset {
			n, err := strconv.ParseInt(string(r.Headers[i].Value), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// producerParts lists, per producer id, the target partitions where
// described shows it (it wrote there, in any epoch).
func producerParts(described kadm.DescribedProducersTopics, target string) map[int64][]int32 {
	out := map[int64][]int32{}
	described.EachPartition(func(dp kadm.DescribedProducersPartition) {
		if dp.Topic != target {
			return
		}
		for _, pr := range dp.ActiveProducers {
			out[pr.ProducerID] = append(out[pr.ProducerID], dp.Partition)
		}
	})
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}
