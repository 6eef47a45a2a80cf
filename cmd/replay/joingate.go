package main

import (
	"fmt"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// joinableSinks refuses, under --join, a sink or dead-letter sink whose
// output several processes cannot share (plan.SinkDescriptor.Shared): the
// partitions are spread over the processes, and so would the output be.
func joinableSinks(join bool, p *plan.Plan) error {
	if !join {
		return nil
	}
	sharedSink := func(t plan.SinkType) bool {
		d, ok := registry.Catalog().Lookup(t)
		return ok && d.Shared
	}
	shared := plan.OrList(registry.Catalog().SharedTypes())
	if !sharedSink(p.Sink.Type) {
		return usageError{fmt.Errorf("--join spreads the partitions over several processes, so a %s sink would split the output among them: use a %s sink", p.Sink.Type, shared)}
	}
	if dl := p.DeadLetter; dl != nil && p.OnError == plan.OnErrorDeadLetter && !sharedSink(dl.Type) {
		return usageError{fmt.Errorf("--join spreads the partitions over several processes, so a %s dead-letter sink would split the dead letters among them: use a %s dead-letter sink", dl.Type, shared)}
	}
	return nil
}
