package memlimit

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ live, floor, want int64 }{
		{20 * mib, 34 * mib, 34 * mib}, // room enough: the floor
		{24 * mib, 34 * mib, 34 * mib}, // exactly Headroom left
		{28 * mib, 34 * mib, 38 * mib}, // raised to live + Headroom
		{2 * mib, 34 * mib, 34 * mib},  // back to the floor, never below
	} {
		if got := Next(tc.live, tc.floor); got != tc.want {
			t.Errorf("Next(%d MiB, %d MiB) = %d MiB, want %d MiB", tc.live/mib, tc.floor/mib, got/mib, tc.want/mib)
		}
	}
}

// Guard raises a limit that a live heap crowds, and says so.
func TestGuardRaises(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	live := make([]byte, 16<<20) // alive across the collection below
	runtime.GC()
	debug.SetMemoryLimit(8 << 20)
	floor := int64(8 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan int64, 1)
	go Guard(ctx, time.Millisecond, floor, func(limit, _ int64) {
		select {
		case got <- limit:
		default:
		}
	})
	select {
	case limit := <-got:
		if limit < int64(len(live))+Headroom {
			t.Errorf("raised to %d, want at least the live %d + Headroom", limit, len(live))
		}
		if now := debug.SetMemoryLimit(-1); now < limit {
			t.Errorf("the runtime's limit is %d, the guard said %d", now, limit)
		}
	case <-ctx.Done():
		t.Fatal("the guard did not raise a limit below the live heap")
	}
	runtime.KeepAlive(live)
}
