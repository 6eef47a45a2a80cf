package worker

import (
	"fmt"
	"sync/atomic"

	"github.com/replay-tool/replay/plan"
)

// ErrorLimitError stops a run whose records that could not be processed
// exceed max_errors.
type ErrorLimitError struct {
	Count   int64  // records that could not be processed so far
	Allowed int64  // what max_errors allows
	Limit   string // max_errors as written
	Records int64  // the records the percentage is taken of
}

func (e *ErrorLimitError) Error() string {
	of := ""
	if e.Limit != fmt.Sprint(e.Allowed) {
		of = fmt.Sprintf(" = %d of the %d records in the run's ranges", e.Allowed, e.Records)
	}
	return fmt.Sprintf("max_errors exceeded: %d records could not be processed, more than max_errors %s%s; the batch with the last one is not committed: "+
		"look at the reasons, then fix the data or the plan, or raise max_errors, and re-run the same command to resume", e.Count, e.Limit, of)
}

// errorBudget counts the records of a run that could not be processed,
// across partitions, against max_errors.
type errorBudget struct {
	limit   plan.ErrorLimit
	allowed int64 // -1: no limit
	records int64
	n       atomic.Int64
}

func newErrorBudget(limit plan.ErrorLimit, records int64) *errorBudget {
	return &errorBudget{limit: limit, allowed: limit.Allowed(records), records: records}
}

// add counts one more record and fails once the count passes the limit.
func (b *errorBudget) add() error {
	n := b.n.Add(1)
	if b.allowed >= 0 && n > b.allowed {
		return &ErrorLimitError{Count: n, Allowed: b.allowed, Limit: b.limit.String(), Records: b.records}
	}
	return nil
}
