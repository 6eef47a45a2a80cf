package runner

import (
	"sync"
	"time"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/rs/zerolog"
)

// Snapshot is a run's progress at one moment (Job.Progress): per partition
// and in total. Every counter only grows while Run runs; after Run returned,
// the snapshot equals its Report.
type Snapshot struct {
	// Started is when Run started; zero before.
	Started    time.Time           `json:"started,omitzero"`
	Partitions []PartitionSnapshot `json:"partitions"`
	// Read, Written and Skipped sum the partitions' counters.
	Read    int64            `json:"read"`
	Written int64            `json:"written"`
	Skipped map[string]int64 `json:"skipped,omitempty"`
	// Offsets is the size of the ranges; Replayed the offsets below the
	// committed positions; Remaining the rest (Offsets - Replayed).
	Offsets   int64 `json:"offsets"`
	Replayed  int64 `json:"replayed"`
	Remaining int64 `json:"remaining"`
	// Done is true when every partition reached its end.
	Done bool `json:"done"`
	// SinkOutcomes is what the sink's durable writes did so far, for a
	// sink that can tell (Report.SinkOutcomes); nil otherwise.
	SinkOutcomes *sinks.Outcomes `json:"sink_outcomes,omitempty"`
	// SourceRetries counts the source cluster's requests that failed with
	// an error that may pass and were tried again (Report.SourceRetries).
	SourceRetries int64 `json:"source_retries,omitempty"`
	// SinkRetries and DeadLetterRetries count the writes to the sink and
	// to the dead-letter sink tried again (Report.SinkRetries).
	SinkRetries       int64 `json:"sink_retries,omitempty"`
	DeadLetterRetries int64 `json:"dead_letter_retries,omitempty"`
}

// PartitionSnapshot is one partition's progress.
type PartitionSnapshot struct {
	Partition int32 `json:"partition"`
	// Start and End bound the range; From is where this run started (the
	// checkpoint on a resume); Next is the committed position: every offset
	// below it is durable in the sink.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	From  int64 `json:"from"`
	Next  int64 `json:"next"`
	// Read counts records processed (as in PartitionReport), Written those
	// handed to the sink, Skipped those left out by reason.
	Read    int64            `json:"read"`
	Written int64            `json:"written"`
	Skipped map[string]int64 `json:"skipped,omitempty"`
	Done    bool             `json:"done"`
}

// Offsets is the size of the partition's range.
func (p PartitionSnapshot) Offsets() int64 { return max(p.End-p.Start, 0) }

// Replayed is the number of offsets of the range below Next.
func (p PartitionSnapshot) Replayed() int64 { return min(max(p.Next-p.Start, 0), p.Offsets()) }

// Remaining is the number of offsets of the range from Next to End.
func (p PartitionSnapshot) Remaining() int64 { return p.Offsets() - p.Replayed() }

// Progress returns the job's progress now. It is safe to call from any
// goroutine while Run runs; before Run, it reports nothing done.
func (j *Job) Progress() Snapshot {
	if live := j.live.Load(); live != nil {
		s := snapshot(live.started, live.states)
		s.SinkOutcomes = outcomesOf(live.sink)
		s.SourceRetries = j.c.retries()
		s.SinkRetries += ownRetries(live.sink)
		s.DeadLetterRetries += ownRetries(j.DeadLetters)
		return s
	}
	s := snapshot(time.Time{}, newStates(j.Resolution, j.readFrom))
	s.SourceRetries = j.c.retries()
	return s
}

// retries is how many requests to the source cluster were retried since
// it was connected; 0 without a cluster.
func (c *Cluster) retries() int64 {
	if c == nil || c.Cluster == nil {
		return 0
	}
	return c.Retries()
}

// sayRetries makes every later retry of a source request a warning in
// log, and says how many were needed so far.
func (c *Cluster) sayRetries(log zerolog.Logger, planName string) {
	if c == nil || c.Cluster == nil {
		return
	}
	c.SetLog(log.With().Str("plan", planName).Logger())
	if n := c.Retries(); n > 0 {
		log.Warn().Str("plan", planName).Int64("retries", n).Msg("source cluster: requests retried before the run started")
	}
}

func snapshot(started time.Time, states []*worker.State) Snapshot {
	s := Snapshot{Started: started, Partitions: make([]PartitionSnapshot, 0, len(states)), Done: true}
	for _, st := range states {
		// done before next: a partition seen done is seen at its end.
		done := st.Done.Load()
		p := PartitionSnapshot{Partition: st.Partition, Start: st.Start, End: st.End, From: st.From,
			Next: max(st.Next.Load(), st.From), Read: st.Read.Load(), Written: st.Written.Load(), Skipped: st.Skips(), Done: done}
		s.Partitions = append(s.Partitions, p)
		s.Read += p.Read
		s.Written += p.Written
		for reason, n := range p.Skipped {
			if s.Skipped == nil {
				s.Skipped = map[string]int64{}
			}
			s.Skipped[reason] += n
		}
		s.Offsets += p.Offsets()
		s.Replayed += p.Replayed()
		s.SinkRetries += st.SinkRetries.Load()
		s.DeadLetterRetries += st.DeadRetries.Load()
		s.Done = s.Done && done
	}
	s.Remaining = s.Offsets - s.Replayed
	return s
}

// PartitionReport is what happened to one partition in a run.
type PartitionReport struct {
	// Topic names the partition's topic in the report of a plan of
	// several topics (JoinReports); "" in a report of one.
	Topic     string  `json:"topic,omitempty"`
	Partition int32   `json:"partition"`
	Outcome   Outcome `json:"outcome"`
	Start     int64   `json:"start"`
	End       int64   `json:"end"`
	// From is where this run started reading (the checkpoint on a resume);
	// Next is the next offset to read when it stopped (all below is durable).
	From int64 `json:"from"`
	Next int64 `json:"next"`
	// Read counts records of the range the run processed (through the
	// window, the filter and the sink); Written those the sink made durable.
	Read    int64 `json:"read"`
	Written int64 `json:"written"`
	// Skipped counts records not written, by reason: filtered (the filter
	// was false), outside-window (strict_timestamps), dead-lettered, and
	// under on_error: skip the reason of Errors.
	Skipped map[string]int64 `json:"skipped,omitempty"`
	// Errors counts records that could not be processed, by reason:
	// decode-error, filter-error, mapping-error, key-error, sink-rejected.
	Errors map[string]int64 `json:"errors,omitempty"`
	// Aborted counts records of aborted transactions dropped (read_committed).
	Aborted int64 `json:"aborted_records,omitempty"`
	// OutsideWindow counts delivered records whose timestamp is outside the
	// time window (producer clock skew; see strict_timestamps).
	OutsideWindow int64 `json:"outside_window,omitempty"`
	// Lost counts offsets of the window deleted before they were read;
	// LostRanges says which.
	Lost       int64 `json:"lost_offsets,omitempty"`
	LostRanges []Gap `json:"lost_ranges,omitempty"`
	// Detail explains the outcome where it is not obvious (Range.Detail).
	Detail     string `json:"detail,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Done       bool   `json:"done"`
	// Moved is true when a rebalance gave the partition to another member
	// of the group (run --join) before this process finished it.
	Moved bool `json:"moved,omitempty"`
	// SinkRetries and DeadLetterRetries count the partition's writes to
	// the sink and to the dead-letter sink tried again after a transient
	// error (Report.SinkRetries).
	SinkRetries       int64 `json:"sink_retries,omitempty"`
	DeadLetterRetries int64 `json:"dead_letter_retries,omitempty"`
}

// Report is the outcome of a run, per partition.
type Report struct {
	// PlanFile is the plan's path, set by the command line.
	PlanFile    string `json:"plan_file,omitempty"`
	Plan        string `json:"plan"`
	Fingerprint string `json:"fingerprint"`
	Topic       string `json:"topic,omitempty"`
	// Topics lists the topics of a plan of several (JoinReports); Topic
	// is "" then (and left out).
	Topics      []string `json:"topics,omitempty"`
	Group       string   `json:"group"`
	Sink        string   `json:"sink"`
	NothingToDo bool     `json:"nothing_to_do"`
	// From and To are the time window's bounds (zero for an offsets window).
	From       time.Time         `json:"from,omitzero"`
	To         time.Time         `json:"to,omitzero"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	Partitions []PartitionReport `json:"partitions"`
	// Published is true once the sink published its output (Sink.Finish):
	// a file sink's output exists only then.
	Published bool `json:"published"`
	// Error is why the run failed or was refused ("" when it succeeded).
	Error   string  `json:"error,omitempty"`
	Ignored []int32 `json:"ignored_partitions,omitempty"`
	// Added lists partitions created after the ranges were resolved: the
	// run does not read them (the ranges are fixed).
	Added []int32 `json:"added_partitions,omitempty"`
	// SinkOutcomes says what the sink's durable writes did with the
	// records (inserted, updated, ...), for a sink that can tell; nil else.
	SinkOutcomes *sinks.Outcomes `json:"sink_outcomes,omitempty"`
	// DeadLetterOutcomes is the same for the dead-letter sink.
	DeadLetterOutcomes *sinks.Outcomes `json:"dead_letter_outcomes,omitempty"`
	// SourceRetries counts the source cluster's requests that failed with
	// an error that may pass and were tried again, since it was connected.
	SourceRetries int64 `json:"source_retries,omitempty"`
	// SinkRetries counts the writes to the sink that failed with a
	// transient error and were tried again (one per try made again, within
	// sink.retry.max_elapsed), and the calls and requests the sink retried
	// by itself and counts (sinkRetryCounter: the exactly-once kafka
	// sink's start, checkpoints and coordinator requests); each one is
	// also a warning in the log. Retries inside a client library (kgo's
	// within one request, pgx's) are not counted. DeadLetterRetries is the
	// same for the dead-letter sink.
	SinkRetries       int64 `json:"sink_retries,omitempty"`
	DeadLetterRetries int64 `json:"dead_letter_retries,omitempty"`
	// Schemas counts, under decode:, the values and keys decoded per
	// schema id (decode.Decoder.Counts); absent when the plan decodes
	// nothing.
	Schemas []decode.SchemaCount `json:"schemas,omitempty"`
}

// sinkRetryCounter is a sink that retries some of its calls by itself
// and counts them (the kafka sink).
type sinkRetryCounter interface{ Retries() int64 }

// ownRetries is what sink counts of its own retries, 0 when none.
func ownRetries(sink sinks.Sink) int64 {
	if c, ok := sink.(sinkRetryCounter); ok {
		return c.Retries()
	}
	return 0
}

// outcomesOf returns the outcomes sink counted, nil when it counts none.
func outcomesOf(sink sinks.Sink) *sinks.Outcomes {
	c := sinks.CapabilitiesOf(sink).Outcomes
	if c == nil {
		return nil
	}
	return new(c.Outcomes())
}

// finish stamps the report's end and the sinks' outcomes.
func (j ending) finish(rep *Report, sink sinks.Sink) {
	rep.Finished = j.opts.Now().UTC()
	rep.SourceRetries = j.c.retries()
	rep.SinkRetries, rep.DeadLetterRetries = ownRetries(sink), ownRetries(j.DeadLetters)
	for _, p := range rep.Partitions {
		rep.SinkRetries += p.SinkRetries
		rep.DeadLetterRetries += p.DeadLetterRetries
	}
	rep.SinkOutcomes = outcomesOf(sink)
	rep.DeadLetterOutcomes = outcomesOf(j.DeadLetters)
	if j.dec != nil {
		rep.Schemas = j.dec.Counts()
	}
}

// Totals sums the partition counters.
func (r *Report) Totals() (read, written, skipped int64) {
	for _, p := range r.Partitions {
		read += p.Read
		written += p.Written
		for _, n := range p.Skipped {
			skipped += n
		}
	}
	return
}

// progress logs totals every ProgressEvery (none when it is negative)
// until the returned func is called.
func (j *Job) progress(states []*worker.State) func() {
	if j.opts.ProgressEvery < 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(j.opts.ProgressEvery)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := snapshot(start, states)
				el := time.Since(start).Seconds()
				j.opts.Log.Info().Int64("written", p.Written).Int64("offsets_done", p.Replayed).Int64("offsets_total", p.Offsets).
					Float64("records_per_second", float64(p.Written)/el).Msg("progress")
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// partitionReport is what the worker of range rg did (its counters s).
func partitionReport(rg Range, s *worker.State) PartitionReport {
	r := PartitionReport{Partition: s.Partition, Outcome: rg.Outcome, Start: s.Start, End: s.End, From: s.From,
		Next: max(s.Next.Load(), s.From), Read: s.Read.Load(), Written: s.Written.Load(), Skipped: s.Skips(), Errors: s.Errors(), Aborted: s.Aborted,
		OutsideWindow: s.Outside, Detail: rg.Detail, DurationMS: s.Elapsed.Milliseconds(), Done: s.Done.Load(),
		SinkRetries: s.SinkRetries.Load(), DeadLetterRetries: s.DeadRetries.Load()}
	r.Lost, r.LostRanges = lostOffsets(rg, s)
	if s.Err != nil {
		r.Error = s.Err.Error()
	}
	return r
}

// lostOffsets returns how many offsets of the window were lost, and where:
// before the run (Range.Lost) and under the reader.
func lostOffsets(rg Range, s *worker.State) (int64, []Gap) {
	var gaps []Gap
	if rg.Lost > 0 {
		gaps = append(gaps, Gap{From: s.From - rg.Lost, To: s.From})
	}
	gaps = append(gaps, s.Lost...)
	var n int64
	for _, g := range gaps {
		n += g.Len()
	}
	return n, gaps
}
