package plan

import (
	"strings"
	"testing"
)

// TestValidateRefusesCommitMetadataTooLarge: a name that makes the
// checkpoints' metadata exceed Kafka's 4096 bytes is refused, naming the
// size and the longest name that fits; that longest name is accepted.
func TestValidateRefusesCommitMetadataTooLarge(t *testing.T) {
	fits := MaxCommitMetadata - commitMetadataOverhead
	long := strings.Repeat("n", fits+1)
	msg := parseProblems(t, strings.Replace(minimalPlan, "name: orders-fix", "name: "+long, 1), testOptions())
	for _, want := range []string{"name:", "4096", "offset.metadata.max.bytes", "up to 4097 bytes", "shorten the name to at most 3906 characters"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, long) {
		t.Errorf("message repeats the whole name:\n%s", msg)
	}
	mustParse(t, strings.Replace(minimalPlan, "name: orders-fix", "name: "+long[1:], 1), testOptions())
}
