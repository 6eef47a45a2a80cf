// Package memlimit keeps the Go runtime's soft memory limit
// (debug.SetMemoryLimit) above what is alive: the limit is there to keep
// garbage from growing the heap, and a live heap close to it would make
// the collector run back to back.
package memlimit

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Headroom is the room the limit keeps above the live heap, in bytes (the
// runtime's own memory, goroutine stacks and free pages take a few MiB of
// it).
const Headroom = 10 << 20

// Next returns the limit to set for live, the bytes the last collection
// found alive: floor while live+Headroom fits under it, else live+Headroom
// (back to floor once live shrinks again).
func Next(live, floor int64) int64 { return max(floor, live+Headroom) }

// Guard reads the live heap (runtime/metrics /gc/heap/live:bytes) every
// interval until ctx ends, and sets the soft memory limit to Next of it
// and floor, the limit a run starts with; changed, when not nil, is told
// each new limit and the live heap that asked for it. A limit set to none
// (math.MaxInt64, the embedded broker's commands) is left alone.
func Guard(ctx context.Context, every time.Duration, floor int64, changed func(limit, live int64)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the metric
		}
		live := int64(sample[0].Value.Uint64())
		limit := debug.SetMemoryLimit(-1)
		if limit == math.MaxInt64 {
			continue
		}
		if next := Next(live, floor); next != limit {
			debug.SetMemoryLimit(next)
			if changed != nil {
				changed(next, live)
			}
		}
	}
}
