package plan_test

import (
	"os"
	"testing"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/registry"
)

// TestMain gives the package's tests the drivers' sink catalog.
func TestMain(m *testing.M) {
	plan.SetTestSinks(registry.Catalog())
	os.Exit(m.Run())
}
