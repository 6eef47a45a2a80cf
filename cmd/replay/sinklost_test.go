package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

// Regression: the file sink's output directory removed while a run was
// writing (its staging directory with it): Write and Sync went on into the
// deleted files, Finish found no staging, published an empty file and the
// run exited 0 with "records written" (the next run noticed and refused;
// a one-shot job had reported success with no data). The run now stops
// at the next Sync or at Finish with exit 3 naming the staging that
// vanished and the way out, publishes nothing, and --restart replays the
// window whole.
func TestRunRefusesStagingRemovedMidRun(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"interleaved", "partition"} {
		t.Run("order="+order, func(t *testing.T) {
			t.Parallel()
			dir, throttled, out, clean, cleanOut := crashSetupOrder(t, order)
			if r := replayProcess(t, dir, "run", "--yes", clean); r.code != exitOK {
				t.Fatalf("clean run: %s", r)
			}
			p := startUntilProgress(t, dir, throttled, out, 3000)
			testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
				for _, cp := range checkpoints(t, throttled, crashPartitions) {
					if cp.Replay && cp.Position > 0 {
						return true
					}
				}
				return false
			}, "a commit of staged records")
			if err := os.RemoveAll(filepath.Dir(out)); err != nil {
				t.Fatal(err)
			}
			r := p.result()
			if r.code != exitRefused {
				t.Fatalf("a run whose output directory was removed: want exit %d, got %s", exitRefused, r)
			}
			for _, want := range []string{"refused", out + ".parts", "during the run", "replay run PLAN --restart"} {
				if !strings.Contains(r.text(), want) {
					t.Errorf("the refusal lacks %q:\n%s", want, r)
				}
			}
			if strings.Contains(r.stdout, "written to "+out) {
				t.Errorf("the refused run reported its output written:\n%s", r.stdout)
			}
			mustNotExist(t, out, "the refused run published")

			// Records below the group's commits are gone: the re-run is
			// refused too, and the way out the messages name, --restart,
			// replays the window whole.
			if r := replayProcess(t, dir, "run", "--yes", throttled); r.code != exitRefused {
				t.Fatalf("re-run: want exit %d, got %s", exitRefused, r)
			}
			if r := replayProcess(t, dir, "run", "--yes", "--restart", throttled); r.code != exitOK {
				t.Fatalf("--restart: %s", r)
			}
			checkFinished(t, dir, throttled, out, cleanOut)
		})
	}
}
