package runner

import (
	"fmt"
)

// LocalOutputError refuses a joined run (RunJoined) into a sink that keeps
// its output on this machine while the partitions are spread over several.
type LocalOutputError struct {
	// Sink is the sink's type; DeadLetters is true for the dead-letter sink.
	Sink        string
	DeadLetters bool
}

func (e *LocalOutputError) Error() string {
	if e.DeadLetters {
		return "the dead-letter sink keeps its output on this machine, and the partitions are spread over several: use a postgres, kafka or http dead-letter sink"
	}
	return fmt.Sprintf("the %s sink keeps its output on this machine, and the partitions are spread over several: use a postgres, kafka or http sink", e.Sink)
}
