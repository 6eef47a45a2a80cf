package runner

import (
	"context"
	"math"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/source"
)

// sampleRecords is how many records Sample reads at each end of a range.
const sampleRecords = 100

// sampleParallelism bounds the partitions sampled at once.
const sampleParallelism = 8

// RecordInfo locates one record.
type RecordInfo struct {
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	// ValueSchemaID and KeySchemaID are the schema ids the record's value
	// and key carry in the Confluent wire format (decode.FramedID), -1
	// when they are not framed; for the review of a plan that decodes.
	ValueSchemaID int32 `json:"-"`
	KeySchemaID   int32 `json:"-"`
	// Tombstone says that the record has no value (a null value).
	Tombstone bool `json:"-"`
}

// RangeSample is what reading the ends of one partition's range found:
// the range still to read, [from, end), where from is the range start or
// the checkpoint of a resumed run.
type RangeSample struct {
	Partition int32 `json:"partition"`
	// First and Last are the first and the last record of the range, nil
	// when it holds none (Last is the last record below the end: offsets may
	// end in transaction markers or compacted gaps).
	First *RecordInfo `json:"first_record,omitempty"`
	Last  *RecordInfo `json:"last_record,omitempty"`
	// Sampled counts the records read; Exact is true when they are every
	// record of the range, so Bytes is a sum, not an estimate.
	Sampled int  `json:"sampled_records"`
	Exact   bool `json:"exact"`
	// Bytes estimates the key and value bytes of the range (what
	// throttle.bytes_per_second counts): the sample's average record size
	// times the offsets in the range.
	Bytes int64 `json:"estimated_bytes"`
}

// Sample reads up to sampleRecords records at each end of every
// partition's remaining range, with the same protocol-level reader as a
// run (under read_committed, aborted records and markers are not records),
// to find the first and last record and to estimate the bytes. It commits
// nothing. Samples are in the order of j.Resolution.Ranges.
func (j *Job) Sample(ctx context.Context) ([]RangeSample, error) {
	out := make([]RangeSample, len(j.Resolution.Ranges))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sampleParallelism)
	for i, r := range j.Resolution.Ranges {
		g.Go(func() error {
			// Offsets below the log start are gone (a window retention
			// cut); under read_committed nothing past the last stable
			// offset can be read yet (an open transaction).
			from, end := max(j.readFrom(r), r.LogStart), r.End
			if j.Plan.Source.Isolation == plan.ReadCommitted && r.LastStable < end {
				end = max(r.LastStable, from)
			}
			s, err := j.c.sampleRange(gctx, j.Resolution.Topic, r.Partition, j.Plan.Source.Isolation, from, end, sampleRecords)
			if end < r.End && s.Sampled > 0 {
				// The bytes of what cannot be read yet are estimated.
				s.Exact = false
				s.Bytes = int64(math.Round(float64(s.Bytes) / float64(max(end-from, 1)) * float64(r.End-from)))
			}
			out[i] = s
			return err
		})
	}
	return out, g.Wait()
}

// sampled is what a sample keeps of a record.
type sampled struct {
	offset       int64
	time         time.Time
	size         int64
	valID, keyID int32 // the framed schema ids, -1 when not framed
	tombstone    bool  // no value
}

// info is what RecordInfo says of the sampled record.
func (s sampled) info() *RecordInfo {
	return &RecordInfo{Offset: s.offset, Timestamp: s.time.UTC(), ValueSchemaID: s.valID, KeySchemaID: s.keyID, Tombstone: s.tombstone}
}

// sampleRange samples [from, end) of one partition with k records at each
// end. The last record is searched backwards from end in windows growing
// eightfold, so a tail of markers, compacted gaps or aborted data costs a
// few fetches, never a read of the whole range.
func (c *Cluster) sampleRange(ctx context.Context, topic string, part int32, iso string, from, end int64, k int) (RangeSample, error) {
	s := RangeSample{Partition: part}
	if from >= end {
		s.Exact = true
		return s, nil
	}
	head, done, err := c.readSample(ctx, topic, part, iso, from, end, k)
	if err != nil || len(head) == 0 {
		s.Exact = done
		return s, err
	}
	recs := head
	if !done {
		floor := head[len(head)-1].offset + 1 // records below are known
		for hi, span := end, int64(k); hi > floor; span *= 8 {
			lo := max(floor, hi-span)
			tail, _, err := c.readSample(ctx, topic, part, iso, lo, hi, math.MaxInt)
			if err != nil {
				return s, err
			}
			if len(tail) > 0 {
				recs = append(recs, tail[max(len(tail)-k, 0):]...)
				break
			}
			hi = lo
		}
	}
	var sum int64
	for _, r := range recs {
		sum += r.size
	}
	s.First, s.Last = recs[0].info(), recs[len(recs)-1].info()
	s.Sampled, s.Exact, s.Bytes = len(recs), done, sum
	if !done {
		s.Bytes = int64(math.Round(float64(sum) / float64(len(recs)) * float64(end-from)))
	}
	return s, nil
}

// readSample reads the records of [from, end) in offset order until it has
// limit of them or the range is done; done reports that the records
// returned are all the range holds.
func (c *Cluster) readSample(ctx context.Context, topic string, part int32, iso string, from, end int64, limit int) ([]sampled, bool, error) {
	r := c.NewReader(source.ReaderConfig{Topic: topic, Partition: part, Isolation: iso, Start: from, End: end})
	var out []sampled
	for !r.Done() && len(out) < limit {
		recs, err := r.Fetch(ctx, nil)
		if err != nil {
			return nil, false, err
		}
		for _, rec := range recs { // keep the little a sample needs, not the values
			out = append(out, sampled{offset: rec.Offset, time: rec.Time, size: int64(len(rec.Key) + len(rec.Value)),
				valID: decode.FramedID(rec.Value), keyID: decode.FramedID(rec.Key), tombstone: rec.Value == nil})
		}
	}
	if len(out) > limit {
		return out[:limit], false, nil
	}
	return out, r.Done(), nil
}

// ETA is how long replaying records offsets of bytes bytes takes at the
// throttle: the slower of its records/s and bytes/s limits. ok is false
// when the plan sets no throttle (the run goes as fast as the sink).
func ETA(t plan.Throttle, records, bytes int64) (d time.Duration, ok bool) {
	var secs float64
	if t.RecordsPerSecond > 0 {
		secs, ok = float64(records)/t.RecordsPerSecond, true
	}
	if t.BytesPerSecond > 0 {
		secs, ok = max(secs, float64(bytes)/float64(t.BytesPerSecond)), true
	}
	return time.Duration(math.Ceil(secs)) * time.Second, ok
}
