package sinktest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Helpers for the drivers' own tests, beside the conformance suite.

// Rec is a record of topic "orders" at partition and offset, stamped
// 2026-11-03T10:00:00Z plus offset milliseconds; an empty key or value is
// nil (a null key, a tombstone).
func Rec(partition int32, offset int64, key, value string) record.Record {
	r := record.Record{Topic: "orders", Partition: partition, Offset: offset,
		Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(offset) * time.Millisecond)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// MustWrite writes batch to s with t's context and fails t on an error.
func MustWrite(t testing.TB, s sinks.Sink, batch ...record.Record) {
	t.Helper()
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}

// WriteAll writes each partition of window to s in batches of up to max
// records (Batches, with a generator seeded by seed), failing t on an
// error.
func WriteAll(t testing.TB, s sinks.Sink, window [][]record.Record, seed uint64, max int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, part := range window {
		for _, b := range Batches(rng, part, max) {
			MustWrite(t, s, b...)
		}
	}
}

// WriteSkipping writes batch to s as the runner does under on_error:
// skip (the Sink contract): a *record.Error takes its record out of the
// batch, which is written again without it. It returns those errors in
// the order s returned them, and fails t on any other error or on an
// error for a record that is not in the batch.
func WriteSkipping(t testing.TB, s sinks.Sink, batch ...record.Record) []*record.Error {
	t.Helper()
	var skipped []*record.Error
	for {
		err := s.Write(t.Context(), batch)
		if err == nil {
			return skipped
		}
		var re *record.Error
		if !errors.As(err, &re) {
			t.Fatalf("write after %d skipped records: %v", len(skipped), err)
		}
		i := slices.IndexFunc(batch, func(r record.Record) bool { return r.Offset == re.Offset })
		if i < 0 {
			t.Fatalf("%v: offset %d is not in the batch", err, re.Offset)
		}
		skipped = append(skipped, re)
		batch = slices.Delete(slices.Clone(batch), i, i+1)
	}
}
