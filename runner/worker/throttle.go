package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// throttleBurst is how much of its rate a bucket holds: in any second at
// most the limit plus this much reaches the sink (half the documented
// tenth of a second, for writes that start late).
const throttleBurst = 50 * time.Millisecond

// Throttle paces the records (and bytes) the partitions of a process hand
// to the sink, under records/s and bytes/s limits shared by all of them.
// Each write is cut to at most a burst's worth (throttleBurst of the rate)
// and to the partition's share of max_batch_wait, and takes its tokens from
// both buckets at one instant, right before it reaches the sink: in any
// sliding second at most the limit plus the burst is written, whatever the
// batch size and the number of partitions, and each partition writes at
// least about every max_batch_wait. Partitions wait in the order they ask
// (a reservation queue), so they share the rate evenly. A log of the
// writes started in the last second (sentLog) holds the limit when the
// machine stalls. A nil *Throttle lets everything through at once.
type Throttle struct {
	mu             sync.Mutex
	records, bytes bucket
	// recordsSent and bytesSent are what the writes of the last second
	// started with.
	recordsSent, bytesSent sentLog
	// maxWait is plan.Throttle.MaxBatchWait.
	maxWait time.Duration
	// active counts the partitions writing through the throttle: a
	// partition's write is cut to its share of maxWait.
	active atomic.Int32
	// now is the clock (tests).
	now func() time.Time
}

// bucket is one token bucket with reservations: tokens are taken at the
// instant the reservation is due, so a bucket with a queue of reservations
// has its last one in the future. rate 0 means unlimited.
type bucket struct {
	rate, burst float64 // tokens per second; tokens held at most
	tokens      float64 // at last
	last        time.Time
}

func newBucket(perSecond float64) bucket {
	if perSecond <= 0 {
		return bucket{}
	}
	burst := max(perSecond*throttleBurst.Seconds(), 1)
	return bucket{rate: perSecond, burst: burst, tokens: burst}
}

// ready is the earliest instant at or after t when n tokens are there.
func (b *bucket) ready(t time.Time, n float64) time.Time {
	if b.rate == 0 {
		return t
	}
	if b.last.IsZero() {
		b.last = t
	}
	start := t
	if b.last.After(start) {
		start = b.last // a queue: after the last reservation
	}
	have := min(b.burst, b.tokens+b.rate*start.Sub(b.last).Seconds())
	if have >= n {
		return start
	}
	return start.Add(time.Duration((n - have) / b.rate * float64(time.Second)))
}

// take takes n tokens at at (no earlier than ready(.., n) said). A request
// above the burst (one record larger than it) is paid in full, never
// credited beyond it.
func (b *bucket) take(at time.Time, n float64) {
	if b.rate == 0 {
		return
	}
	if at.After(b.last) {
		b.tokens = min(max(b.burst, n), b.tokens+b.rate*at.Sub(b.last).Seconds())
		b.last = at
	}
	b.tokens -= n
}

// NewThrottle returns the throttle of limit t (nil when t sets no limit).
func NewThrottle(t plan.Throttle) *Throttle {
	if !t.Limited() {
		return nil
	}
	wait := time.Duration(t.MaxBatchWait)
	if wait <= 0 {
		wait = plan.DefaultMaxBatchWait
	}
	th := &Throttle{records: newBucket(t.RecordsPerSecond), bytes: newBucket(float64(t.BytesPerSecond)), maxWait: wait, now: time.Now}
	th.recordsSent.max = th.records.rate + th.records.burst
	th.bytesSent.max = th.bytes.rate + th.bytes.burst
	return th
}

// MaxWait is the longest a partition should go without writing and
// committing under the throttle; 0 for a nil throttle.
func (t *Throttle) MaxWait() time.Duration {
	if t == nil {
		return 0
	}
	return t.maxWait
}

// join counts a partition that writes through the throttle (d 1) until
// it leaves (d -1).
func (t *Throttle) join(d int32) {
	if t != nil {
		t.active.Add(d)
	}
}

// chunk is how many of recs (at least one) the next write carries: at most
// a burst, and at most a share of max_batch_wait's tokens among the active
// partitions, in records and in bytes; and their size.
func (t *Throttle) chunk(recs []record.Record) (n, size int) {
	n = len(recs)
	if t == nil || n == 0 {
		return n, 0
	}
	share := float64(max(t.active.Load(), 1))
	// rate and burst never change: read without the lock.
	if r := t.records.rate; r > 0 {
		n = min(n, max(int(min(t.records.burst, r*t.maxWait.Seconds()/share)), 1))
	}
	limit := -1.0
	if r := t.bytes.rate; r > 0 {
		limit = max(min(t.bytes.burst, r*t.maxWait.Seconds()/share), 1)
	}
	for i := 0; i < n; i++ {
		s := len(recs[i].Key) + len(recs[i].Value) // what a record costs of bytes/s
		if i > 0 && limit >= 0 && float64(size+s) > limit {
			return i, size
		}
		size += s
	}
	return n, size
}

// reserve takes n records and size bytes from both buckets at the earliest
// instant, at or after now, when both have them, and returns that instant.
func (t *Throttle) reserve(now time.Time, n, size int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := t.records.ready(now, float64(n))
	if b := t.bytes.ready(now, float64(size)); b.After(at) {
		at = b
	}
	t.records.take(at, float64(n))
	t.bytes.take(at, float64(size))
	return at
}

// Take cuts the next write from the front of recs (at least one record,
// see chunk), waits until the throttle lets it through and returns its
// length. Without limits it returns len(recs) at once. ctx ending first
// returns its error: nothing may be written then (the tokens stay taken).
func (t *Throttle) Take(ctx context.Context, recs []record.Record) (int, error) {
	if t == nil {
		return len(recs), nil
	}
	n, size := t.chunk(recs)
	if n == 0 {
		return 0, nil
	}
	now := t.now()
	if d := t.reserve(now, n, size).Sub(now); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	} else if err := ctx.Err(); err != nil {
		return 0, err
	}
	return n, t.admit(ctx, n, size)
}

// admit waits, after the buckets let a write of n records and size bytes
// through, until the writes started in the last second leave room for it
// (sentLog), and records it as started now. Without a stall it is free.
func (t *Throttle) admit(ctx context.Context, n, size int) error {
	for {
		t.mu.Lock()
		now := t.now()
		d := max(t.recordsSent.delay(now, float64(n)), t.bytesSent.delay(now, float64(size)))
		if d <= 0 {
			t.recordsSent.add(now, float64(n))
			t.bytesSent.add(now, float64(size))
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
	}
}

// sentLog is what writes started with in the last second, oldest first:
// a sliding window over the instants the writes really started. max 0
// means unlimited.
type sentLog struct {
	max  float64 // most per second: the limit plus the burst
	at   []time.Time
	n    []float64
	sum  float64
	head int
}

// expire drops the writes that started a second or more before now: no
// window [s, s+1s) holding now holds them.
func (l *sentLog) expire(now time.Time) {
	cut := now.Add(-time.Second)
	for l.head < len(l.at) && !l.at[l.head].After(cut) {
		l.sum -= l.n[l.head]
		l.head++
	}
	if l.head == len(l.at) || l.head > 1024 && l.head > len(l.at)/2 {
		l.at, l.n = append(l.at[:0], l.at[l.head:]...), append(l.n[:0], l.n[l.head:]...)
		l.head = 0
	}
	if l.head == len(l.at) {
		l.sum = 0 // no drift from float sums
	}
}

// delay is how long from now until n more fit in the second before; 0
// when they fit now. n alone above max fits once the log is empty.
func (l *sentLog) delay(now time.Time, n float64) time.Duration {
	if l.max <= 0 {
		return 0
	}
	l.expire(now)
	if l.sum+n <= l.max || l.head == len(l.at) {
		return 0
	}
	need := l.sum + n - l.max
	for i := l.head; i < len(l.at); i++ {
		need -= l.n[i]
		if need <= 0 || i == len(l.at)-1 {
			return l.at[i].Add(time.Second).Sub(now) + time.Millisecond
		}
	}
	return time.Millisecond
}

// add logs a write of n started at now. A write above max (one record
// larger than a second of the rate) is logged as weighing nothing: the
// bucket held it back for its full cost before it started, so it holds
// back no write up to max in the next second, and another write above max
// (which fits only an empty log) waits for it to be a second old.
func (l *sentLog) add(now time.Time, n float64) {
	if l.max <= 0 || n == 0 {
		return
	}
	if n > l.max {
		n = 0
	}
	l.at = append(l.at, now)
	l.n = append(l.n, n)
	l.sum += n
}
