package runner

import (
	"context"
	"math"

	"golang.org/x/time/rate"
)

// Throttle holds token buckets on records/s and bytes/s shared by every
// partition of a process. A nil *Throttle, or a zero limit,
// means unlimited.
type Throttle struct {
	records, bytes *rate.Limiter
}

// NewThrottle returns a throttle for the given limits (0 = unlimited). The
// buckets hold a tenth of a second of tokens (at least one), so the rate
// over any 10 s stays within a few percent of the limit; a batch larger than
// the bucket is paid for in instalments.
func NewThrottle(recordsPerSecond float64, bytesPerSecond int64) *Throttle {
	t := &Throttle{}
	if recordsPerSecond > 0 {
		t.records = rate.NewLimiter(rate.Limit(recordsPerSecond), max(int(recordsPerSecond/10), 1))
	}
	if bytesPerSecond > 0 {
		t.bytes = rate.NewLimiter(rate.Limit(bytesPerSecond), max(int(bytesPerSecond/10), 1))
	}
	return t
}

// Wait blocks until n records of size bytes may pass, or ctx is done.
func (t *Throttle) Wait(ctx context.Context, n, size int) error {
	if t == nil {
		return nil
	}
	if err := waitN(ctx, t.records, n); err != nil {
		return err
	}
	return waitN(ctx, t.bytes, size)
}

// waitN is WaitN for any n: rate.Limiter refuses n above its burst.
func waitN(ctx context.Context, l *rate.Limiter, n int) error {
	if l == nil || l.Limit() == rate.Inf || l.Limit() == math.MaxFloat64 {
		return nil
	}
	for n > 0 {
		step := min(n, l.Burst())
		if err := l.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}
