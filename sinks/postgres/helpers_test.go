package postgres_test

import (
	"math/rand/v2"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// Test helpers shared by this package's tests.

// writeAll writes each partition of window in batches of up to max records.
func writeAll(t *testing.T, s sinks.Sink, window [][]record.Record, seed uint64, max int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, part := range window {
		for _, b := range sinktest.Batches(rng, part, max) {
			if err := s.Write(t.Context(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
}
