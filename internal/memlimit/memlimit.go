// Package memlimit keeps the Go runtime's soft memory limit
// (debug.SetMemoryLimit) above what is alive: the limit is there to keep
// garbage from growing the heap, and a live heap close to it would make
// the collector run back to back.
package memlimit

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Headroom is the room the limit keeps above the live heap, in bytes: the
// collector then runs at most every Headroom bytes allocated.
const Headroom = 12 << 20

// Next returns the limit to set for live, the bytes the last collection
// found alive, under limit: limit while live+Headroom fits under it, else
// live+Headroom. It never lowers the limit.
func Next(live, limit int64) int64 {
	if want := live + Headroom; want > limit {
		return want
	}
	return limit
}

// Guard reads the live heap (runtime/metrics /gc/heap/live:bytes) every
// interval until ctx ends, and raises the soft memory limit to Next of it;
// raised, when not nil, is told each new limit and the live heap that
// asked for it.
func Guard(ctx context.Context, every time.Duration, raised func(limit, live int64)) {
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
		if next := Next(live, limit); next != limit {
			debug.SetMemoryLimit(next)
			if raised != nil {
				raised(next, live)
			}
		}
	}
}
