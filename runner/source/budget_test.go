package source

import (
	"context"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

func TestMemBudget(t *testing.T) {
	b := newMemBudget(100)
	if !b.tryAcquire(60) || b.tryAcquire(60) {
		t.Fatal("tryAcquire: 60 then 60 of 100 must take the first and refuse the second")
	}
	got := make(chan int, 3)
	for i, n := range []int64{50, 10, 30} { // served in order: 10 waits behind 50
		go func() {
			if err := b.acquire(context.Background(), n); err != nil {
				t.Error(err)
			}
			got <- i
		}()
		// The next waiter queues only after this one did, however late its
		// goroutine runs.
		testenv.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.waiters) == i+1
		}, "waiter %d never queued", i)
	}
	select {
	case i := <-got:
		t.Fatalf("waiter %d served while 60 of 100 are held and 50 is first in line", i)
	case <-time.After(50 * time.Millisecond):
	}
	for want, release := range []int64{10, 20, 30} { // 50 fits, then 10, then 30
		b.release(release)
		if i := <-got; i != want {
			t.Fatalf("served waiter %d, want %d", i, want)
		}
		select {
		case i := <-got:
			t.Fatalf("waiter %d served too early", i)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if b.inUse() != 90 {
		t.Fatalf("inUse %d, want 90", b.inUse())
	}
	// Over the limit (a charge), nothing new fits until enough is back;
	// when nothing is held, anything fits.
	b.charge(50)
	if b.tryAcquire(1) {
		t.Fatal("took bytes past the limit")
	}
	b.release(140)
	if !b.tryAcquire(500) {
		t.Fatal("an empty budget refused a request larger than its limit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := b.acquire(ctx, 1); err == nil {
		t.Fatal("acquire past the limit returned without waiting")
	}
	b.release(500)
	if len(b.waiters) != 0 || b.inUse() != 0 {
		t.Fatalf("a cancelled waiter left %d waiters, %d bytes held", len(b.waiters), b.inUse())
	}
}
