package runner

import (
	"time"
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
	// Read counts records delivered by the broker, Written those handed to
	// the sink, Skipped those left out by reason (as in PartitionReport).
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

// liveRun is what Job.Progress reads: the counters of the running (or
// last) run.
type liveRun struct {
	started time.Time
	states  []*partitionState
}

// Progress returns the job's progress now. It is safe to call from any
// goroutine while Run runs, and costs the run nothing: it reads the
// counters the partition workers keep. Before Run, it reports the ranges
// with nothing done.
func (j *Job) Progress() Snapshot {
	if live := j.live.Load(); live != nil {
		return snapshot(live.started, live.states)
	}
	states := make([]*partitionState, len(j.Resolution.Ranges))
	for i, r := range j.Resolution.Ranges {
		states[i] = &partitionState{Range: r, from: j.from(r)}
	}
	return snapshot(time.Time{}, states)
}

func snapshot(started time.Time, states []*partitionState) Snapshot {
	s := Snapshot{Started: started, Partitions: make([]PartitionSnapshot, 0, len(states)), Done: true}
	for _, st := range states {
		// done before next: a partition seen done is seen at its end.
		done := st.done.Load()
		p := PartitionSnapshot{Partition: st.Partition, Start: st.Start, End: st.End, From: st.from,
			Next: max(st.next.Load(), st.from), Read: st.read.Load(), Written: st.written.Load(), Skipped: st.skips(), Done: done}
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
		s.Done = s.Done && done
	}
	s.Remaining = s.Offsets - s.Replayed
	return s
}
