package parquet

import "testing"

// A timestamp in RFC 3339 text, the usual form, converts without
// allocating (a failed integer parse would allocate its error each row).
func TestTimestampValueAllocs(t *testing.T) {
	var err error
	n := testing.AllocsPerRun(100, func() {
		_, err = timestampValue("2026-12-07T14:44:58.233Z", kTimestampMillis)
	})
	if err != nil || n != 0 {
		t.Fatalf("timestampValue of RFC 3339 text: %v allocations (%v), want none", n, err)
	}
}
