package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/source"
)

// Outcome says what resolution found for one partition.
type Outcome string

// Partition outcomes.
const (
	// InRange: the window maps to [Start, End) (possibly empty when no record
	// falls between the bounds).
	InRange Outcome = "in-range"
	// EmptyPartition: the partition holds no records (log start == high watermark).
	EmptyPartition Outcome = "empty-partition"
	// AfterLastRecord: no record has a timestamp >= from; nothing to replay.
	AfterLastRecord Outcome = "window-after-last-record"
	// BeforeFirstRecord: every record is at or after to; nothing to replay.
	BeforeFirstRecord Outcome = "window-before-first-record"
	// StartBeforeRetention: retention already deleted the start of the window.
	StartBeforeRetention Outcome = "start-before-retention"
	// Resumed: the range comes from an earlier run's checkpoints.
	Resumed Outcome = "resumed"
)

// Range is the fixed offset range [Start, End) of one partition, with the
// partition's offsets at resolution time. Offsets are Kafka offsets; a
// range may contain gaps (compaction, transaction markers).
type Range struct {
	// Topic names the range's topic in a resolution of several topics
	// (Resolution.Topics); "" in a resolution of one.
	Topic     string  `json:"topic,omitempty"`
	Partition int32   `json:"partition"`
	Start     int64   `json:"start"`
	End       int64   `json:"end"`
	Outcome   Outcome `json:"outcome"`
	// LogStart is the log start offset (first offset still stored).
	LogStart int64 `json:"log_start_offset"`
	// HighWatermark is the offset after the last replicated record.
	HighWatermark int64 `json:"high_watermark"`
	// LastStable is the last stable offset (read_committed upper bound, KIP-98).
	LastStable int64 `json:"last_stable_offset"`
	// Lost is the number of offsets of the window already deleted by retention
	// (only with allow_data_loss; otherwise resolution fails).
	Lost int64 `json:"lost_offsets,omitempty"`
	// Detail explains an outcome that is not obvious, e.g. why a time window
	// selects nothing in a partition that holds records.
	Detail string `json:"detail,omitempty"`
	// OpenTransaction is true when, under read_committed, the range ends
	// past the last stable offset: a transaction is open there (KIP-98),
	// and a run waits for it to end (source.open_transaction_timeout).
	// Producers are the producers with a transaction open on the partition,
	// where the broker tells them (DescribeProducers, KIP-664).
	OpenTransaction bool              `json:"open_transaction,omitempty"`
	Producers       []source.Producer `json:"open_producers,omitempty"`
}

// Records is the number of offsets in the range (an upper bound on records:
// gaps are not subtracted).
func (r Range) Records() int64 { return r.End - r.Start }

// Resolution is a plan's window fixed to offsets, partition by partition,
// at one moment. It never changes during a run: the topic keeps growing, the
// replay does not chase it.
type Resolution struct {
	Plan        string `json:"plan"`
	Fingerprint string `json:"fingerprint"`
	// Topic is the topic of a resolution of one; "" in a resolution of
	// several (Topics).
	Topic string `json:"topic,omitempty"`
	// Topics lists the topics of a resolution of several
	// (JoinResolutions), in the plan's order: each range names its topic,
	// and TopicIDs holds their IDs.
	Topics   []string          `json:"topics,omitempty"`
	TopicIDs map[string]string `json:"topic_ids,omitempty"`
	// TopicID is the topic's ID at resolution (KIP-516), "" when the
	// brokers report none: a topic deleted and created again under the
	// same name has another, and the ranges are refused for it.
	TopicID    string    `json:"topic_id,omitempty"`
	Group      string    `json:"group"`
	ResolvedAt time.Time `json:"resolved_at"`
	// From and To are the time bounds used (zero for an offsets window; To is
	// zero when the window runs to the high watermark).
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	// Ranges are sorted by partition.
	Ranges []Range `json:"ranges"`
	// Unselected lists partitions of the topic that the plan does not select.
	Unselected []int32 `json:"unselected_partitions,omitempty"`
	// Shards, when set, splits the ranges for several processes (replay
	// plan --shards N): see SplitShards and ForShard.
	Shards *ShardSet `json:"shards,omitempty"`
}

// logDetails warns about every partition whose outcome needs explaining.
func (r *Resolution) logDetails(log zerolog.Logger) {
	for _, rg := range r.Ranges {
		if rg.Detail != "" {
			log.Warn().Str("topic", r.Topic).Int32("partition", rg.Partition).Str("outcome", string(rg.Outcome)).Msg(rg.Detail)
		}
	}
}

// rangeOf returns the range of partition part; ok is false when the
// resolution has none.
func (r *Resolution) rangeOf(part int32) (rg Range, ok bool) {
	i := slices.IndexFunc(r.Ranges, func(rg Range) bool { return rg.Partition == part })
	if i < 0 {
		return Range{}, false
	}
	return r.Ranges[i], true
}

// partitionsOf lists the partitions of rgs.
func partitionsOf(rgs []Range) []int32 {
	parts := make([]int32, len(rgs))
	for i, rg := range rgs {
		parts[i] = rg.Partition
	}
	return parts
}

// Total is the number of offsets to replay over all partitions.
func (r *Resolution) Total() int64 {
	var n int64
	for _, rg := range r.Ranges {
		n += rg.Records()
	}
	return n
}

// RetentionError reports a window whose start was already deleted by
// retention (or DeleteRecords): replaying it would silently skip records.
type RetentionError struct {
	Topic     string
	Partition int32
	// Start is where the window starts; LogStart is the first offset still
	// stored, written at FirstTime.
	Start, LogStart int64
	FirstTime       time.Time
}

func (e *RetentionError) Error() string {
	at := ""
	if !e.FirstTime.IsZero() {
		at = " (written " + e.FirstTime.UTC().Format(time.RFC3339Nano) + ")"
	}
	return fmt.Sprintf("partition %s/%d: the window starts before the log start offset: retention deleted it; the first offset still available is %d%s. Narrow the window to start at or after it, or set allow_data_loss: true to replay what is left", e.Topic, e.Partition, e.LogStart, at)
}

// Resolve fixes p's window to per-partition offset ranges:
// start = ListOffsets(from), the first offset whose timestamp is >= from;
// end = ListOffsets(to), or the high watermark when to is unset or no
// record is that late. The lookups by time read the whole log
// (read_uncommitted): under read_committed a lookup answers nothing for a
// record past the last stable offset, which would end the range before an
// open transaction and drop the committed records after it. A range that
// ends past the last stable offset is marked (Range.OpenTransaction): a run
// waits for the transaction to end. A window with no record at or after
// from is empty at the high watermark, never the whole topic. A start that
// retention already deleted is a *RetentionError unless the plan sets
// allow_data_loss.
func Resolve(ctx context.Context, c *Cluster, p *plan.Plan, now time.Time) (*Resolution, error) {
	topic := p.Source.Topic
	all, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	selected, unselected, err := selectPartitions(p, all)
	if err != nil {
		return nil, err
	}
	offs, err := c.ListOffsets(ctx, topic, selected, p.Source.Isolation)
	if err != nil {
		return nil, err
	}
	topicID, err := c.TopicID(ctx, topic)
	if err != nil {
		return nil, err
	}
	res := &Resolution{Plan: p.Name, Fingerprint: p.Fingerprint(), Topic: topic, TopicID: topicID, Group: p.Group, ResolvedAt: now.UTC(), Unselected: unselected}
	var cut []error // retention: every partition is resolved, then refused
	add := func(rg Range, err error) error {
		if re := (*RetentionError)(nil); errors.As(err, &re) {
			cut, err = append(cut, err), nil
		}
		if err == nil {
			res.Ranges = append(res.Ranges, rg)
		}
		return err
	}
	if !p.Window.IsTime() {
		for _, part := range selected {
			if err := add(offsetRange(topic, part, p.Window.OffsetRangeOf(part), offs[part], p.AllowDataLoss)); err != nil {
				return nil, err
			}
		}
		return res, c.finishResolution(ctx, p, res, cut)
	}
	res.From, res.To = p.Window.Bounds(now)
	margin := time.Duration(p.Window.SkewMargin)
	starts, err := c.OffsetsAt(ctx, topic, selected, res.From.Add(-margin), plan.ReadUncommitted)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	if !res.To.IsZero() {
		if ends, err = c.OffsetsAt(ctx, topic, selected, res.To.Add(margin), plan.ReadUncommitted); err != nil {
			return nil, err
		}
	}
	for _, part := range selected {
		end, ok := ends[part]
		if !ok {
			end = -1
		}
		if err := add(c.checkTimeRange(ctx, p, timeRange(part, starts[part], end, offs[part]), res.From.Add(-margin))); err != nil {
			return nil, err
		}
	}
	return res, c.finishResolution(ctx, p, res, cut)
}

// CutError is a resolution refused because retention already deleted the
// start of the window in some partitions (each a *RetentionError).
// Resolution holds every partition's range, for the reviewer to see.
type CutError struct {
	Resolution *Resolution
	Errs       []error
}

func (e *CutError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *CutError) Unwrap() []error { return e.Errs }

// finishResolution notes the ranges an open transaction holds back, and
// returns a *CutError when retention cut the window (cut).
func (c *Cluster) finishResolution(ctx context.Context, p *plan.Plan, res *Resolution, cut []error) error {
	for i := range res.Ranges {
		c.noteOpenTransaction(ctx, p, &res.Ranges[i])
	}
	if len(cut) > 0 {
		return &CutError{Resolution: res, Errs: cut}
	}
	return nil
}

// openTxnNote starts the Detail of a range an open transaction holds back.
const openTxnNote = "open transaction: "

// noteOpenTransaction marks a range that ends past its partition's last
// stable offset under read_committed (Range.OpenTransaction), naming the
// producers where the broker tells them, and says so in its Detail.
func (c *Cluster) noteOpenTransaction(ctx context.Context, p *plan.Plan, rg *Range) {
	rg.OpenTransaction, rg.Producers = false, nil
	if i := strings.Index(rg.Detail, openTxnNote); i >= 0 { // an earlier note (a pinned file)
		rg.Detail = strings.TrimSuffix(rg.Detail[:i], "; ")
	}
	if p.Source.Isolation != plan.ReadCommitted || rg.LastStable >= rg.End || rg.Start >= rg.End || c == nil || c.Cluster == nil {
		return
	}
	rg.OpenTransaction = true
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rg.Producers, _ = c.OpenProducers(dctx, p.Source.Topic, rg.Partition) // best effort: for the reviewer
	who := ""
	if len(rg.Producers) > 0 {
		who = " (" + rg.Producers[0].String() + ")"
	}
	note := fmt.Sprintf(openTxnNote+"a transaction%s holds the last stable offset at %d, below the range end %d (high watermark %d): a run delivers the records before it and waits up to %s (source.open_transaction_timeout) for it to end; the committed records after it are never skipped",
		who, rg.LastStable, rg.End, rg.HighWatermark, time.Duration(p.Source.OpenTransactionTimeout))
	if rg.Detail != "" {
		note = rg.Detail + "; " + note
	}
	rg.Detail = note
}

// checkTimeRange explains a range after the last record, and decides
// whether a range starting at the log start lost records of the window
// to retention: a *RetentionError unless the plan allows data loss.
func (c *Cluster) checkTimeRange(ctx context.Context, p *plan.Plan, rg Range, from time.Time) (Range, error) {
	topic, part := p.Source.Topic, rg.Partition
	switch rg.Outcome {
	case AfterLastRecord:
		var err error
		rg.Detail, err = c.explainAfterLast(ctx, topic, rg, p.Source.Isolation)
		return rg, err
	case StartBeforeRetention:
		first, err := c.FirstRecordTime(ctx, topic, part, rg.LogStart, p.Source.Isolation)
		if err != nil {
			return rg, err
		}
		switch {
		case first.Before(from):
			rg.Outcome = InRange // the deleted records were older than the window
		case !p.AllowDataLoss:
			return rg, &RetentionError{Topic: topic, Partition: part, Start: rg.Start, LogStart: rg.LogStart, FirstTime: first}
		case rg.Start == rg.End:
			rg.Lost = rg.LogStart
			rg.Detail = fmt.Sprintf("retention deleted the window: the first record still stored, at offset %d, is stamped %s, at or after to; allow_data_loss replays nothing of this partition; up to %d offsets of the window ([0, %d)) are lost (their timestamps went with them)",
				rg.LogStart, first.UTC().Format(time.RFC3339Nano), rg.LogStart, rg.LogStart)
		default:
			rg.Lost = rg.LogStart
			rg.Detail = fmt.Sprintf("retention deleted the start of the window: the first record still stored, at offset %d, is stamped %s, at or after from; allow_data_loss replays from there; up to %d offsets of the window ([0, %d)) are lost (their timestamps went with them)",
				rg.LogStart, first.UTC().Format(time.RFC3339Nano), rg.LogStart, rg.LogStart)
		}
	}
	return rg, nil
}

// timeRange maps the ListOffsets answers for from (start, -1 = none) and to
// (end, -1 = none or unset) to a range, which never ends past the high
// watermark.
func timeRange(part int32, start, end int64, o source.Offsets) Range {
	rg := Range{Partition: part, LogStart: o.LogStart, HighWatermark: o.HighWatermark, LastStable: o.LastStable}
	switch {
	case o.HighWatermark == o.LogStart:
		rg.Start, rg.End, rg.Outcome = o.HighWatermark, o.HighWatermark, EmptyPartition
		return rg
	case start < 0: // no record at or after from
		rg.Start, rg.End, rg.Outcome = o.HighWatermark, o.HighWatermark, AfterLastRecord
		return rg
	}
	if end < 0 || end > o.HighWatermark {
		end = o.HighWatermark
	}
	start = min(start, end)
	rg.Start, rg.End, rg.Outcome = start, end, InRange
	switch {
	case start == o.LogStart && o.LogStart > 0:
		// ListOffsets clamps to the log start: the window may have begun
		// in deleted data.
		rg.Outcome = StartBeforeRetention
	case start == end && end == o.LogStart:
		rg.Outcome = BeforeFirstRecord
	}
	return rg
}

func offsetRange(topic string, part int32, w plan.OffsetRange, o source.Offsets, allowLoss bool) (Range, error) {
	rg := Range{Partition: part, LogStart: o.LogStart, HighWatermark: o.HighWatermark, LastStable: o.LastStable, Outcome: InRange}
	pick := func(s plan.OffsetSpec) int64 {
		switch {
		case s.Earliest:
			return o.LogStart
		case s.Latest:
			return o.HighWatermark
		}
		return s.Offset
	}
	rg.Start, rg.End = pick(w.From), pick(w.To)
	if rg.End > o.HighWatermark {
		return rg, fmt.Errorf("partition %s/%d: window end %d is beyond the high watermark %d (last stable offset %d): those records do not exist yet; use to: latest or a lower offset", topic, part, rg.End, o.HighWatermark, o.LastStable)
	}
	if rg.Start > rg.End {
		return rg, fmt.Errorf("partition %s/%d: window start %d is after its end %d", topic, part, rg.Start, rg.End)
	}
	if rg.Start < o.LogStart {
		if !allowLoss {
			rg.Outcome = StartBeforeRetention
			return rg, &RetentionError{Topic: topic, Partition: part, Start: rg.Start, LogStart: o.LogStart}
		}
		rg.Lost = min(o.LogStart, rg.End) - rg.Start
		rg.Detail = fmt.Sprintf("retention deleted offsets [%d, %d) of the window: allow_data_loss replays from %d; the %d offsets are lost", rg.Start, rg.Start+rg.Lost, rg.Start+rg.Lost, rg.Lost)
		rg.Start = min(o.LogStart, rg.End)
		rg.Outcome = StartBeforeRetention
	}
	if o.HighWatermark == o.LogStart {
		rg.Outcome = EmptyPartition
	}
	return rg, nil
}

func selectPartitions(p *plan.Plan, all []int32) (selected, unselected []int32, err error) {
	want := p.Source.Partitions.List
	offsetsWindow := p.Window.Kind() == plan.WindowOffsets && p.Window.OffsetsAll == nil
	if offsetsWindow {
		want = slices.Sorted(maps.Keys(p.Window.Offsets))
	}
	if p.Source.Partitions.All && !offsetsWindow || len(want) == 0 {
		return all, nil, nil
	}
	for _, part := range want {
		if !slices.Contains(all, part) {
			return nil, nil, fmt.Errorf("topic %s has no partition %d (it has %d partitions: 0..%d)", p.Source.Topic, part, len(all), len(all)-1)
		}
	}
	for _, part := range all {
		if !slices.Contains(want, part) {
			unselected = append(unselected, part)
		}
	}
	return want, unselected, nil
}

// explainAfterLast says why the lookup of from found no record in a
// partition that holds records: stamped earlier, or not stamped at all.
func (c *Cluster) explainAfterLast(ctx context.Context, topic string, rg Range, iso string) (string, error) {
	if rg.LastStable <= rg.LogStart {
		return "", nil
	}
	recs, err := c.LastRecords(ctx, topic, rg.Partition, rg.LogStart, rg.LastStable, 16, iso)
	if err != nil {
		return "", fmt.Errorf("read the last records of %s/%d: %w", topic, rg.Partition, err)
	}
	if len(recs) == 0 {
		return "", nil
	}
	last := recs[len(recs)-1]
	if last.Time.UnixMilli() < 0 {
		return fmt.Sprintf("the partition holds records (offsets %d to %d) but the last one, at offset %d, carries no timestamp (-1: written by a client older than Kafka 0.10 or with timestamps turned off): a time lookup cannot find such records, so the time window selects nothing here; replay them with an offsets window", rg.LogStart, rg.LastStable-1, last.Offset), nil
	}
	return fmt.Sprintf("no record is stamped at or after from: the last record, at offset %d, is stamped %s", last.Offset, last.Time.UTC().Format(time.RFC3339Nano)), nil
}

// selects reports whether p reads partition part of its topic.
func selects(p *plan.Plan, part int32) bool {
	switch {
	case p.Window.Kind() == plan.WindowOffsets && p.Window.OffsetsAll == nil: // an offsets window names its partitions
		_, ok := p.Window.Offsets[part]
		return ok
	case p.Source.Partitions.All || len(p.Source.Partitions.List) == 0:
		return true
	}
	return slices.Contains(p.Source.Partitions.List, part)
}
