package testenv

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// MillisFields checks the JSON log lines of log whose message contains
// msg: each has every one of fields as a whole number (a duration in
// milliseconds, its unit in its name, e.g. retry_in_ms). It fails t when
// no line has msg, and returns how many lines it checked.
func MillisFields(t testing.TB, log, msg string, fields ...string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if s, _ := m["message"].(string); !strings.Contains(s, msg) {
			continue
		}
		n++
		for _, f := range fields {
			v, ok := m[f].(float64)
			if !ok || v != math.Trunc(v) || v < 0 {
				t.Errorf("log line %s: want %s, a whole number of milliseconds", line, f)
			}
		}
	}
	if n == 0 {
		t.Errorf("no log line with the message %q in:\n%s", msg, log)
	}
	return n
}
