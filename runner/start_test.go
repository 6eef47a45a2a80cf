package runner

import (
	"errors"
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
)

// The start decision, from gathered facts alone: every way a run begins
// and every refusal, with the error's type.
func TestDecideStart(t *testing.T) {
	p := &plan.Plan{Name: "orders", Group: "replay.orders", Source: plan.Source{Topic: "orders"}}
	fp := p.Fingerprint()
	mine := map[int32]group.Checkpoint{0: {Partition: 0, Offset: 5, Replay: true, Fingerprint: fp, End: 9, TopicID: "T1"}, 1: {Partition: 1, Offset: -1}}
	other := map[int32]group.Checkpoint{0: {Partition: 0, Offset: 5, Replay: true, Fingerprint: "another", End: 9}}
	foreign := map[int32]group.Checkpoint{0: {Partition: 0, Offset: 5}}
	none := map[int32]group.Checkpoint{0: {Partition: 0, Offset: -1}}
	running := &group.RunRecord{State: group.RecordRunning, Ranges: []group.RecordedRange{{Partition: 0, Start: 0, End: 9, Committed: 5}}}
	reset := &group.RunRecord{State: group.RecordReset}
	const (
		ok = iota
		safety
		incarnation
		expired
	)
	for _, tc := range []struct {
		name  string
		f     startFacts
		want  startKind
		fails int
	}{
		{"no commits: fresh", startFacts{cps: none, topicID: "T1"}, startFresh, ok},
		{"this plan's checkpoints: resume", startFacts{cps: mine, topicID: "T1"}, startResume, ok},
		{"this plan's checkpoints, restart: fresh", startFacts{cps: mine, topicID: "T1", restart: true}, startFresh, ok},
		{"another plan's checkpoints: refused", startFacts{cps: other}, 0, safety},
		{"another plan's checkpoints, restart: fresh", startFacts{cps: other, restart: true}, startFresh, ok},
		{"a commit replay did not make: refused", startFacts{cps: foreign}, 0, safety},
		{"a commit replay did not make, restart: refused still", startFacts{cps: foreign, restart: true}, 0, safety},
		{"checkpoints of another incarnation: refused", startFacts{cps: mine, topicID: "T2"}, 0, incarnation},
		{"checkpoints of another incarnation, restart: fresh", startFacts{cps: mine, topicID: "T2", restart: true}, startFresh, ok},
		{"checkpoints of another incarnation, pinned: refused", startFacts{cps: mine, topicID: "T2", pinned: true}, 0, incarnation},
		{"pinned", startFacts{cps: none, pinned: true}, startPinned, ok},
		{"pinned over this plan's checkpoints", startFacts{cps: mine, topicID: "T1", pinned: true}, startPinned, ok},
		{"joined, nothing fixed: refused", startFacts{cps: none, join: true}, 0, safety},
		{"joined, this plan's checkpoints: resume", startFacts{cps: mine, topicID: "T1", join: true}, startResume, ok},
		{"recorded run, commits gone: refused", startFacts{cps: none, record: running}, 0, expired},
		{"recorded run, commits gone, resume from sink", startFacts{cps: none, record: running, resumeFromSink: true}, startFromRecord, ok},
		{"recorded run, commits gone, restart", startFacts{cps: none, record: running, restart: true}, startFromRecord, ok},
		{"recorded run reset: fresh", startFacts{cps: none, record: reset}, startFresh, ok},
		{"recorded run, commits there: resume", startFacts{cps: mine, topicID: "T1", record: running}, startResume, ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.plan = p
			got, err := decideStart(tc.f)
			var se *fault.SafetyError
			var ie *group.IncarnationError
			var ee *group.ExpiredError
			switch tc.fails {
			case ok:
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
			case safety:
				if !errors.As(err, &se) || errors.As(err, &ie) || errors.As(err, &ee) {
					t.Fatalf("got %d, %v; want a plain *fault.SafetyError", got, err)
				}
			case incarnation:
				if !errors.As(err, &ie) {
					t.Fatalf("got %d, %v; want an *group.IncarnationError", got, err)
				}
			case expired:
				if !errors.As(err, &se) || !errors.As(err, &ee) || se.Hint != fault.HintExpired {
					t.Fatalf("got %d, %v; want the *fault.SafetyError of an *group.ExpiredError", got, err)
				}
			}
		})
	}
}

func TestDecideNoCommits(t *testing.T) {
	p := &plan.Plan{Name: "orders", Group: "replay.orders", Source: plan.Source{Topic: "orders"}}
	running := &group.RunRecord{State: group.RecordRunning, Ranges: []group.RecordedRange{{Partition: 0, End: 9, Committed: 5}}}
	reset := &group.RunRecord{State: group.RecordReset}
	for _, tc := range []struct {
		name                    string
		rec                     *group.RunRecord
		restart, resumeFromSink bool
		want                    noCommits
		refused                 bool
	}{
		{"no record: check the sink", nil, false, false, noCommits{checkSink: true}, false},
		{"no record, restart", nil, true, false, noCommits{}, false},
		{"no record, resume from sink", nil, false, true, noCommits{fromSink: true, fresh: true}, false},
		{"recorded progress: refused", running, false, false, noCommits{}, true},
		{"recorded progress, resume from sink", running, false, true, noCommits{fromSink: true}, false},
		{"recorded progress, restart", running, true, false, noCommits{}, false},
		{"record reset", reset, false, false, noCommits{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideNoCommits(p, tc.rec, tc.restart, tc.resumeFromSink)
			var ee *group.ExpiredError
			if tc.refused != errors.As(err, &ee) || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v, refused %v", got, err, tc.want, tc.refused)
			}
		})
	}
}
