package worker

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source"
)

// State is one partition's live counters. Its Worker writes them; a run's
// progress reads the atomic ones from any goroutine while the worker
// runs, and its report reads the others once the worker returned.
type State struct {
	// TopicPartition is the partition, [Start, End) its range, and From
	// where this run starts reading (the checkpoint on a resume).
	record.TopicPartition
	Start, End, From int64
	// Next is the committed position (every offset below it is durable in
	// the sink); Written counts the records the sink made durable, Read
	// those processed (window, pipeline, sink).
	Next, Written, Read atomic.Int64
	// Pos and DeadPos are the sinks' positions (sinks.Positioner) the last
	// successful commit stored with Next: a commit of the end again carries
	// them too.
	Pos, DeadPos atomic.Int64
	// Done is set once the partition reached its end.
	Done atomic.Bool
	// Abandoned: a write was left unfinished when the run was stopped (the
	// sink was failing); Uncommitted: records were written that the
	// partition's last commit does not cover (it failed). Both only tell
	// the final message of an interrupted run what really happened.
	Abandoned, Uncommitted atomic.Bool
	// SinkRetries and DeadRetries count the writes to the sink and to the
	// dead-letter sink tried again (retry).
	SinkRetries, DeadRetries atomic.Int64
	// Aborted counts the records of aborted transactions dropped, Outside
	// the records delivered though stamped outside the time window, Lost
	// the offsets deleted under the reader; Started, Elapsed and Err are
	// when the worker started, how long it ran and why it failed.
	Aborted, Outside int64
	Lost             []source.Gap
	Started          time.Time
	Elapsed          time.Duration
	Err              error

	mu          sync.Mutex
	skipped     map[string]int64 // guarded by mu
	unprocessed map[string]int64 // records that cannot be processed, by reason
}

// retried counts a write to what ("sink", "dead-letter sink") tried again.
func (s *State) retried(what string) {
	if what == "sink" {
		s.SinkRetries.Add(1)
	} else {
		s.DeadRetries.Add(1)
	}
}

func (s *State) skip(reason string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped == nil {
		s.skipped = map[string]int64{}
	}
	s.skipped[reason] += n
}

// Skips returns a copy of the records left out, by reason (nil when there
// are none).
func (s *State) Skips() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.skipped)
}

// Errors is the records that could not be processed, by reason; read it
// once the worker returned.
func (s *State) Errors() map[string]int64 { return s.unprocessed }

func (s *State) unprocessable(reason string) {
	if s.unprocessed == nil {
		s.unprocessed = map[string]int64{}
	}
	s.unprocessed[reason]++
}
