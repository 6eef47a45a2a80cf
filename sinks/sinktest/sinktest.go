// Package sinktest is the conformance suite every sink passes: writing a
// window, re-delivering it (the same batches, overlapping ones, a whole
// re-run), duplicate keys in one batch, concurrent partitions, cancelled
// contexts, and crashing at a random point then resuming from an earlier
// offset must all leave exactly the contents of one clean run.
//
// A sink's test file implements Harness and calls RunWith with the
// features the sink declares (Features):
//
//	func TestSQLiteConformance(t *testing.T) {
//		sinktest.RunWith(t, h, sinktest.Features{Durable: sinktest.OnWrite, Resumes: true, ...})
//	}
//
// Every run is deterministic: the records, the batch cuts and the crash
// points come from fixed seeds.
package sinktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Harness opens the sink under test and reads back what it stored.
type Harness interface {
	// New opens the sink on t's target (a file, a table). The first call for
	// a t creates a fresh, empty target; later calls with the same t reopen
	// that same target, as a process restarted after a crash would (same
	// path, table and run identity). Targets gives this behaviour. The suite
	// closes every sink it opens when t ends.
	New(t *testing.T) sinks.Sink
	// Contents returns everything stored on t's target, one Stored.String()
	// per stored record, in any order (the suite sorts). The suite calls it
	// after Finish.
	Contents(t *testing.T) []string
}

// KeyedHarness is a Harness whose sink stores one row per idempotency key
// (a database table), so that records can share a key.
type KeyedHarness interface {
	Harness
	// NewKeyed is New for records that carry keyer's idempotency keys
	// (the suite writes through Keyed), with the sink's default conflict
	// policy, under which the last offset of a key wins.
	NewKeyed(t *testing.T, keyer *sinks.Keyer) sinks.Sink
}

// open opens h's sink on t's target and closes it when t ends.
func open(t *testing.T, h Harness) sinks.Sink {
	t.Helper()
	s := h.New(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testWindow(t *testing.T, h Harness) {
	window := windowFor(h, 1, 3)
	Equal(t, "contents", cleanRun(t, h, window, rand.New(rand.NewPCG(1, 1)), 10), Want(window))
}

// cleanRun writes every partition of window in batches of up to max
// records on a sink opened on t's target, finishes it and returns the
// target's contents.
func cleanRun(t *testing.T, h Harness, window [][]record.Record, rng *rand.Rand, max int) []string {
	s := open(t, h)
	for _, part := range window {
		for _, b := range Batches(rng, part, max) {
			write(t, s, b)
		}
	}
	finish(t, s)
	return h.Contents(t)
}

// testRedelivery re-delivers batches already written, batches overlapping
// written and new records, and then the whole window again on a reopened
// sink (a re-run), with Finish called twice.
func testRedelivery(t *testing.T, h Harness, f Features) {
	window := windowFor(h, 2, 3)
	s := open(t, h)
	rng := rand.New(rand.NewPCG(2, 1))
	for _, part := range window {
		half, quarter := len(part)/2, len(part)/4
		first := Batches(rng, part[:half], 7)
		for _, b := range first {
			write(t, s, b)
		}
		for _, b := range first { // the same batches again
			write(t, s, b)
		}
		for _, b := range Batches(rng, part[quarter:half+quarter], 9) { // old and new records
			write(t, s, b)
		}
		for _, b := range Batches(rng, part[half:], 5) {
			write(t, s, b)
		}
	}
	finish(t, s)
	want := Want(window)
	Equal(t, "contents after re-delivery", distinct(f, h.Contents(t)), want)

	rerun := open(t, h)
	for _, part := range window {
		for _, b := range Batches(rng, part, 13) {
			write(t, rerun, b)
		}
	}
	finish(t, rerun)
	finish(t, rerun)
	Equal(t, "contents after a re-run", distinct(f, h.Contents(t)), want)
}

// testDuplicateKey writes batches in which records share a key: the last
// offset of each key must win, and sharing a key is not an error.
func testDuplicateKey(t *testing.T, h Harness) {
	kh, ok := h.(KeyedHarness)
	if !ok {
		t.Skip("the sink stores every record: it has no idempotency key to share")
	}
	keyer, err := sinks.NewKeyer("{{ .Partition }}/{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	window := windowFor(h, 3, 2)
	s := Keyed(kh.NewKeyed(t, keyer), keyer)
	t.Cleanup(func() { _ = s.Close() })
	last := map[string]record.Record{}
	dups := 0
	for p, part := range window {
		if p == 0 {
			write(t, s, part) // one batch: its duplicate keys resolved inside it
		} else {
			for _, b := range Batches(rand.New(rand.NewPCG(3, 1)), part, 4) {
				write(t, s, b)
			}
		}
		for _, r := range part {
			k, err := keyer.Key(&r)
			if err != nil {
				t.Fatal(err)
			}
			if _, seen := last[k]; seen && p == 0 {
				dups++
			}
			last[k] = r
		}
	}
	if dups == 0 {
		t.Fatal("the test window has no duplicate key in one batch: the test checks nothing")
	}
	finish(t, s)
	var want []string
	for _, r := range last {
		want = append(want, Expect(r).String())
	}
	Equal(t, "contents (last offset of each key)", h.Contents(t), want)
}

// testConcurrent writes eight partitions at once, each re-delivering some of
// its batches; run it with -race.
func testConcurrent(t *testing.T, h Harness, f Features) {
	window := windowFor(h, 4, 8)
	s := open(t, h)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make([]error, len(window))
	for p, part := range window {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(4, uint64(p)))
			for _, b := range Batches(rng, part, 6) {
				for range 1 + rng.IntN(2) {
					if err := s.Write(ctx, b); err != nil {
						errs[p] = fmt.Errorf("write partition %d at offset %d: %w", p, b[0].Offset, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	finish(t, s)
	Equal(t, "contents", distinct(f, h.Contents(t)), Want(window))
}

// testCancelled checks that a Write under a cancelled context fails with the
// context's error, and that Writes cut short by a deadline at any point
// leave a target that a re-delivery completes.
func testCancelled(t *testing.T, h Harness, f Features) {
	window := windowFor(h, 5, 3)
	s := open(t, h)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	rng := rand.New(rand.NewPCG(5, 1))
	for p, part := range window {
		batches := Batches(rng, part, 8)
		for i, b := range batches {
			if i%2 == 0 {
				err := s.Write(cancelled, b)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("partition %d: Write with a cancelled context returned %v, want an error wrapping context.Canceled", p, err)
				}
			}
			// A deadline that may expire at any point of the Write: whatever
			// it leaves, the re-delivery below must complete it. As the
			// runner does, a failed batch is delivered again before any
			// later batch of its partition (the Sink contract): a sink may
			// take a later batch's offsets as the end of what it holds.
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(300))*time.Microsecond)
			if err := s.Write(ctx, b); err != nil {
				write(t, s, b)
			}
			cancel()
		}
		for _, b := range batches { // the re-delivery after the failures
			write(t, s, b)
		}
	}
	finish(t, s)
	Equal(t, "contents", distinct(f, h.Contents(t)), Want(window))
}

// testCrashAndResume drops the sink at a random point without Finish (once
// or twice), opens a new one on the same target, re-delivers every
// partition from a random earlier offset, and compares the result with a
// clean run on another target.
func testCrashAndResume(t *testing.T, h Harness, f Features) {
	for seed := uint64(10); seed < 16; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			window := windowFor(h, seed, 3)
			var clean, resumed []string
			t.Run("clean", func(t *testing.T) { clean = cleanRun(t, h, window, rand.New(rand.NewPCG(seed, 1)), 10) })
			t.Run("crashed", func(t *testing.T) { resumed = distinct(f, crashRun(t, h, window, seed)) })
			if t.Failed() {
				return
			}
			Equal(t, "clean run", clean, Want(window))
			Equal(t, "crash and resume vs clean run", resumed, clean)
		})
	}
}

// crashRun writes window in incarnations: each opens the sink on the same
// target, resumes every partition from a random point at or before what the
// target durably holds (as a Kafka commit lagging the writes would), writes
// a random number of batches in a random partition order and is dropped
// without Finish or Close, until the last one completes and finishes.
func crashRun(t *testing.T, h Harness, window [][]record.Record, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 2))
	durable := make([]int, len(window)) // records of each partition the target holds
	crashes := 1 + rng.IntN(2)
	for c := 0; ; c++ {
		s := open(t, h)
		var pending [][][]record.Record // per partition, the batches to deliver
		total := 0
		for p, part := range window {
			from := rng.IntN(durable[p] + 1)
			bs := Batches(rng, part[from:], 9)
			pending = append(pending, bs)
			total += len(bs)
		}
		n := total // the last incarnation writes everything
		if c < crashes {
			n = rng.IntN(total)
		}
		for range n {
			p := rng.IntN(len(window))
			for len(pending[p]) == 0 {
				p = (p + 1) % len(window)
			}
			b := pending[p][0]
			pending[p] = pending[p][1:]
			write(t, s, b)
			i, _ := slices.BinarySearchFunc(window[p], b[len(b)-1].Offset, func(r record.Record, o int64) int { return cmp.Compare(r.Offset, o) })
			durable[p] = i + 1
		}
		if c == crashes {
			finish(t, s)
			return h.Contents(t)
		}
		t.Logf("crash %d after %d of %d batches", c+1, n, total)
	}
}

func write(t *testing.T, s sinks.Sink, b []record.Record) {
	t.Helper()
	if err := s.Write(t.Context(), b); err != nil {
		t.Fatalf("write partition %d offsets %d..%d: %v", b[0].Partition, b[0].Offset, b[len(b)-1].Offset, err)
	}
}

func finish(t *testing.T, s sinks.Sink) {
	t.Helper()
	if err := s.Finish(t.Context()); err != nil {
		t.Fatalf("finish: %v", err)
	}
}
