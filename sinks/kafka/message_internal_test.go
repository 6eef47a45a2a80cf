package kafka

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/replay-tool/replay/sinks/encode"
)

// encode.AppendTimestamp, which the sink's timestamp headers hold, writes
// what time.Format with encode.TimeLayout writes.
func TestAppendTimeAsTimeLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []time.Time{time.UnixMilli(-1), time.UnixMilli(0), time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 2, 30, 0, 5_000_000, time.FixedZone("x", 3600))}
	for range 5000 {
		cases = append(cases, time.UnixMilli(rng.Int64N(400_000_000_000_000)-100_000_000_000_000))
	}
	for _, c := range cases {
		if got, want := string(encode.AppendTimestamp(nil, c)), c.UTC().Format(encode.TimeLayout); got != want {
			t.Fatalf("AppendTimestamp(%v) = %s, want %s", c, got, want)
		}
	}
}
