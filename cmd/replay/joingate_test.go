package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/kafka"
)

// The --join gate follows plan.SinkDescriptor.Shared (registry.Catalog): postgres, kafka and
// http sinks can be shared by several processes, a file, sqlite or stdout
// sink cannot; the same for dead-letter sinks (a stdout one is invalid).
func TestJoinableSinks(t *testing.T) {
	const (
		sinkRefused = "--join spreads the partitions over several processes, so a %s sink would split the output among them: use a postgres, kafka or http sink"
		dlRefused   = "--join spreads the partitions over several processes, so a %s dead-letter sink would split the dead letters among them: use a postgres, kafka or http dead-letter sink"
	)
	for _, tc := range []struct {
		sink, deadLetter plan.SinkType
		want             string // "" for allowed
	}{
		{"postgres", "", ""},
		{"kafka", "", ""},
		{"http", "", ""},
		{"file", "", sinkRefused},
		{"sqlite", "", sinkRefused},
		{"stdout", "", sinkRefused},
		{"postgres", "kafka", ""},
		{"kafka", "postgres", ""},
		{"postgres", "http", ""},
		{"postgres", "file", dlRefused},
		{"kafka", "sqlite", dlRefused},
	} {
		p := &plan.Plan{Sink: plan.Sink{Type: tc.sink}, OnError: plan.OnErrorFail}
		bad := tc.sink
		if tc.deadLetter != "" {
			p.OnError, p.DeadLetter = plan.OnErrorDeadLetter, &plan.Sink{Type: tc.deadLetter}
			bad = tc.deadLetter
		}
		err := joinableSinks(true, p)
		var ue usageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("sink %s, dead letters %q: refused: %v", tc.sink, tc.deadLetter, err)
		case tc.want == "":
		case !errors.As(err, &ue):
			t.Errorf("sink %s, dead letters %q: got %v, want a usage error", tc.sink, tc.deadLetter, err)
		case err.Error() != fmt.Sprintf(tc.want, bad):
			t.Errorf("sink %s, dead letters %q:\n got %s\nwant %s", tc.sink, tc.deadLetter, err, fmt.Sprintf(tc.want, bad))
		}
		if err := joinableSinks(false, p); err != nil {
			t.Errorf("without --join: %v", err)
		}
	}
	// A dead-letter sink that on_error does not use is not checked.
	p := &plan.Plan{Sink: plan.Sink{Type: "postgres"}, OnError: plan.OnErrorSkip, DeadLetter: &plan.Sink{Type: "file"}}
	if err := joinableSinks(true, p); err != nil {
		t.Errorf("unused dead-letter file sink: %v", err)
	}
}

// An exactly-once kafka sink is accepted under --join: its transactions
// commit the group's offsets as the process's member of the group.
func TestJoinAcceptsExactlyOnce(t *testing.T) {
	p := &plan.Plan{Sink: plan.Sink{Type: "kafka", Config: &kafka.Section{ExactlyOnce: true}}, OnError: plan.OnErrorFail}
	if err := joinableSinks(true, p); err != nil {
		t.Fatalf("joinableSinks = %v, want nil", err)
	}
}
