// Package fault holds the errors of the runner that callers act on: a
// refusal (SafetyError: the command line exits 3) and the Hint that
// names what a person can do about an error.
package fault

import "fmt"

// SafetyError is a refusal to touch a consumer group or to run a plan
// because doing so could corrupt someone else's progress or mix two plans.
// The command line exits with code 3 on it.
type SafetyError struct {
	Group  string
	Reason string
	// Hint is what the user can do about it; the caller words it.
	Hint Hint
	// Err is the error behind the refusal, if any: the broker's, or the
	// sink's refusal to resume (sinks.Resumer).
	Err error
}

func (e *SafetyError) Error() string { return fmt.Sprintf("refusing group %q: %s", e.Group, e.Reason) }

func (e *SafetyError) Unwrap() error { return e.Err }

// Hint names what a person can do about an error, for the caller to word
// (the command line names its flags). The zero Hint says nothing.
type Hint string

// Hints of the runner's errors.
const (
	HintNone Hint = ""
	// HintRestart: discard the group's checkpoints and replay the window
	// from its start (the run option Restart).
	HintRestart Hint = "restart"
	// HintResolveOnce: a joined run on a fresh group needs the same fixed
	// ranges in every process: resolve once to a resolution file.
	HintResolveOnce Hint = "resolve-once"
	// HintSameResolution: start every joined process with the same
	// resolution file.
	HintSameResolution Hint = "same-resolution"
	// HintResolveAgain: the resolution file no longer fits the plan or the
	// topic: resolve the window again.
	HintResolveAgain Hint = "resolve-again"
	// HintFinishOrRestart: the group's run has other ranges than the
	// resolution file: finish that run without the file, or restart with it.
	HintFinishOrRestart Hint = "finish-or-restart"
	// HintJoinedFile: a joined process was given other ranges than the
	// group's: use the other processes' resolution file, or none.
	HintJoinedFile Hint = "joined-file"
	// HintJoinedOnly: only joined processes of the plan may share its group.
	HintJoinedOnly Hint = "joined-only"
	// HintResume: the source cluster failed for longer than the retry
	// budget; run the plan again once it is healthy, and it resumes.
	HintResume Hint = "resume"
	// HintOpenTransaction: an open transaction held a partition back for
	// longer than source.open_transaction_timeout; run the plan again once
	// it ended (or with a longer timeout), and it resumes.
	HintOpenTransaction Hint = "open-transaction"
	// HintExpired: the group lost the commits of a run whose progress is
	// recorded elsewhere: continue from the sink's own checkpoints
	// (ResumeFromSink), or start over (Restart).
	HintExpired Hint = "expired"
	// HintSinkResume: the sink kept failing for longer than
	// sink.retry.max_elapsed; run the plan again once it is healthy, and
	// it resumes.
	HintSinkResume Hint = "sink-resume"
)

// Hinted is an error with a Hint (With).
type Hinted struct {
	Err  error
	Hint Hint
}

func (e *Hinted) Error() string { return e.Err.Error() }

func (e *Hinted) Unwrap() error { return e.Err }

// With attaches h to err (nil stays nil).
func With(err error, h Hint) error {
	if err == nil {
		return nil
	}
	return &Hinted{Err: err, Hint: h}
}

// HintOf returns the hint of the first error in err's chain that has one:
// a *SafetyError's, or one the runner attached.
func HintOf(err error) Hint {
	switch e := err.(type) {
	case *SafetyError:
		if e.Hint != HintNone {
			return e.Hint
		}
	case *Hinted:
		return e.Hint
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return HintOf(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if h := HintOf(e); h != HintNone {
				return h
			}
		}
	}
	return HintNone
}
