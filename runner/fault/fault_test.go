package fault

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replay-tool/replay/runner/source"
)

func TestHintOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Hint
	}{
		{"nil", nil, HintNone},
		{"plain", errors.New("x"), HintNone},
		{"safety-error", fmt.Errorf("prepare: %w", &SafetyError{Group: "g", Reason: "r", Hint: HintRestart}), HintRestart},
		{"inside-a-partition-error", &source.PartitionError{Topic: "t", Err: With(errors.New("x"), HintResolveAgain)}, HintResolveAgain},
		{"joined", errors.Join(errors.New("a"), &SafetyError{Hint: HintJoinedOnly}), HintJoinedOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HintOf(tc.err); got != tc.want {
				t.Fatalf("HintOf = %q, want %q", got, tc.want)
			}
		})
	}
}
