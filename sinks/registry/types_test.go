package registry

import (
	"testing"

	"github.com/replay-tool/replay/plan"
)

// Every sink type package plan describes (and so validates) has a driver
// here, and the table holds no type plan does not describe: a type added
// on one side only fails here rather than as "unknown sink type" at run
// time.
func TestConstructorsMatchSinkTypes(t *testing.T) {
	described := map[plan.SinkType]bool{}
	for _, d := range plan.SinkTypes() {
		described[d.Type] = true
		if constructors[d.Type] == nil {
			t.Errorf("sink type %q is described by package plan but has no constructor", d.Type)
		}
	}
	for typ := range constructors {
		if !described[typ] {
			t.Errorf("sink type %q has a constructor but no descriptor in package plan", typ)
		}
	}
}
