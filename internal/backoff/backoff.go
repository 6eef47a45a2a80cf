// Package backoff is replay's one retry schedule: a capped exponential
// backoff with jitter, within a time budget counted from the first
// failure. The source's broker calls, the runner's sink writes and the
// kafka sink's calls outside Write all retry by it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy says how a failing operation is retried.
type Policy struct {
	// Min is the first wait, doubled after each failure up to Max. Each
	// wait is jittered down by up to half (so that partitions failing
	// together do not retry together).
	Min, Max time.Duration
	// Budget is how long, from the first failure, the operation may keep
	// failing before it is given up; 0 gives up at the first failure.
	Budget time.Duration
}

// Retry is one operation's retries under a Policy. The zero value is not
// usable: start with Policy.Start.
type Retry struct {
	p        Policy
	wait     time.Duration
	first    time.Time
	attempts int
	now      func() time.Time
}

// Start begins the retries of one operation.
func (p Policy) Start() *Retry { return &Retry{p: p, wait: p.Min, now: time.Now} }

// Failed records that an attempt failed now and returns how long to wait
// before the next one and how much of the budget is left. ok is false
// when the budget is spent (nothing is left): the caller gives up. The
// wait is the jittered backoff, cut to end with the budget so that one
// more attempt is made at its end.
func (r *Retry) Failed() (wait, left time.Duration, ok bool) {
	r.attempts++
	now := r.now()
	if r.first.IsZero() {
		r.first = now
	}
	left = r.p.Budget - now.Sub(r.first)
	if left <= 0 {
		return 0, 0, false
	}
	wait = min(r.wait/2+rand.N(r.wait/2+1), left)
	r.wait = min(2*r.wait, r.p.Max)
	return wait, left, true
}

// Attempts is the number of failed attempts recorded so far.
func (r *Retry) Attempts() int { return r.attempts }

// Elapsed is the time since the first failure (0 before it).
func (r *Retry) Elapsed() time.Duration {
	if r.first.IsZero() {
		return 0
	}
	return r.now().Sub(r.first)
}
