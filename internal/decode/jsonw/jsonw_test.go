package jsonw

import (
	"testing"
	"time"
)

// TimestampUnix writes what Timestamp writes of the same instant, on
// both sides of its fast range.
func TestTimestampUnixMatchesTimestamp(t *testing.T) {
	check := func(sec, nsec int64) {
		for _, digits := range []int{0, 3, 6, 9} {
			for _, zone := range []bool{true, false} {
				got := string(TimestampUnix(nil, sec, nsec, digits, zone))
				want := string(Timestamp(nil, time.Unix(sec, nsec), digits, zone))
				if got != want {
					t.Fatalf("TimestampUnix(%d, %d, %d, %v) = %s, want %s", sec, nsec, digits, zone, got, want)
				}
			}
		}
	}
	for sec := int64(0); sec < maxFastUnix+86400*800; sec += 86400*37 + 3607 {
		check(sec, sec%1e9)
	}
	for _, sec := range []int64{-1, 0, 951782400, 951868799, 4107542399, maxFastUnix - 1, maxFastUnix, -62135596800} {
		check(sec, 999999999)
	}
}
