package testenv

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// OraclePython returns the Python of the oracles' virtualenv
// (scripts/oracles: fastavro, protobuf, pyarrow, duckdb), at
// $REPLAY_ORACLES_DIR or ~/.cache/replay/oracles, after checking that it
// imports modules. Without it the test skips, or fails under
// REPLAY_TEST_REQUIRE_ORACLES=1 (as CI runs).
func OraclePython(t testing.TB, modules ...string) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	dir := cmp.Or(os.Getenv("REPLAY_ORACLES_DIR"), filepath.Join(home, ".cache", "replay", "oracles"))
	py := filepath.Join(dir, "bin", "python")
	check := "pass"
	if len(modules) > 0 {
		check = "import " + strings.Join(modules, ", ")
	}
	if out, err := exec.Command(py, "-c", check).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no oracle virtualenv with %s at %s (%v: %s): run scripts/oracles", strings.Join(modules, ", "), dir, err, strings.TrimSpace(string(out)))
		if os.Getenv("REPLAY_TEST_REQUIRE_ORACLES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}
