package group

import (
	"math"
	"strings"
	"testing"

	"github.com/replay-tool/replay/plan"
)

// TestCommitMetadataWorstCase keeps plan.CommitMetadataSize (what validate
// refuses above Kafka's 4096 bytes) in step with the metadata the runner
// commits: every field at its longest.
func TestCommitMetadataWorstCase(t *testing.T) {
	for _, name := range []string{"", "orders-fx-fix-2026-11-03", strings.Repeat("x", 3000)} {
		m := Meta{Tool: MetaTool, Plan: name, Fingerprint: strings.Repeat("f", len(new(plan.Plan).Fingerprint())),
			Start: math.MinInt64, End: math.MinInt64, Pos: math.MinInt64, DPos: math.MinInt64, Iv: "9999-12-31T23:59:59Z"}
		if got, want := len(m.Encode()), plan.CommitMetadataSize(name); got != want {
			t.Errorf("name of %d characters: the longest metadata is %d bytes, plan.CommitMetadataSize says %d: update commitMetadataOverhead in plan/commitmeta.go", len(name), got, want)
		}
	}
}
