package registry

import "testing"

// The types that keep checkpoints of their own, as messages name them.
func TestCheckpointKeepers(t *testing.T) {
	if got, want := Catalog().CheckpointKeepers(), "a postgres or sqlite sink with checkpoint_table"; got != want {
		t.Errorf("CheckpointKeepers() = %q, want %q", got, want)
	}
}
