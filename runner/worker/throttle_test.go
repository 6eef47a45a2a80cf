package worker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// stamp is one record that reached a sink at a time.
type stamp struct {
	at        time.Time
	partition int32
	size      int
}

// maxInWindow is the most records (or, with bytes, bytes) of stamps whose
// times lie within any window [t, t+win).
func maxInWindow(stamps []stamp, win time.Duration, bytes bool) (most int, from time.Time) {
	s := slices.Clone(stamps)
	sort.Slice(s, func(i, j int) bool { return s[i].at.Before(s[j].at) })
	sum, j := 0, 0
	for i := range s {
		if bytes {
			sum += s[i].size
		} else {
			sum++
		}
		for s[i].at.Sub(s[j].at) >= win {
			if bytes {
				sum -= s[j].size
			} else {
				sum--
			}
			j++
		}
		if sum > most {
			most, from = sum, s[j].at
		}
	}
	return most, from
}

// simulate drives th with a virtual clock: each of parts partitions has
// batches of batch records of size bytes each, total records in all, and
// writes each cut (Throttle.chunk) at the instant reserve gives it, then
// asks for the next at once. It returns every record's stamp.
func simulate(th *Throttle, parts, total, batch, size int) []stamp {
	return simulateLate(th, parts, total, batch, size, nil)
}

// simulateLate is simulate where late(at) is how much later than its
// reservation at a write really starts (a stalled machine); the writes go
// through the log of started writes (Throttle.admit) at that instant. The
// partitions' steps run in the order of their instants, as they would.
func simulateLate(th *Throttle, parts, total, batch, size int, late func(at time.Time) time.Duration) []stamp {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		when  time.Time // of the next step
		admit bool      // the next step admits n records, sz bytes
		n, sz int
		left  int
	}
	ps := make([]step, parts)
	for p := range ps {
		ps[p] = step{when: start, left: total / parts}
		th.join(1)
	}
	recs := make([]record.Record, batch)
	for i := range recs {
		recs[i].Value = make([]byte, size)
	}
	var out []stamp
	for {
		p := -1
		for q := range ps {
			if ps[q].left > 0 && (p < 0 || ps[q].when.Before(ps[p].when)) {
				p = q
			}
		}
		if p < 0 {
			return out
		}
		s := &ps[p]
		if !s.admit {
			s.n, s.sz = th.chunk(recs[:min(batch, s.left)])
			at := th.reserve(s.when, s.n, s.sz)
			if late != nil {
				at = at.Add(late(at))
			}
			s.when, s.admit = at, true
			continue
		}
		if d := max(th.recordsSent.delay(s.when, float64(s.n)), th.bytesSent.delay(s.when, float64(s.sz))); d > 0 {
			s.when = s.when.Add(d)
			continue
		}
		th.recordsSent.add(s.when, float64(s.n))
		th.bytesSent.add(s.when, float64(s.sz))
		for i := 0; i < s.n; i++ {
			out = append(out, stamp{at: s.when, partition: int32(p), size: size})
		}
		s.left -= s.n
		s.admit = false
		if s.left == 0 {
			th.join(-1)
		}
	}
}

// In any second, at most the limit plus the burst (a tenth of a second of
// the rate) is let through, for any batch size and number of partitions;
// a run of N records at rate R takes N/R within 2 %. Pure logic: a virtual
// clock, no sleeping.
func TestThrottleEverySecond(t *testing.T) {
	for _, tc := range []struct {
		rate         float64
		bytesRate    int64
		parts, total int
		batch, size  int
	}{
		{rate: 100, parts: 4, total: 10000, batch: 1000, size: 10},
		{rate: 1000, parts: 1, total: 20000, batch: 1000, size: 10},
		{rate: 1000, parts: 6, total: 24000, batch: 100000, size: 10},
		{rate: 100, parts: 200, total: 4000, batch: 1000, size: 10},
		{rate: 7, parts: 3, total: 300, batch: 1000, size: 10},
		{bytesRate: 100_000, parts: 4, total: 20000, batch: 1000, size: 100},
		{rate: 5000, bytesRate: 100_000, parts: 4, total: 20000, batch: 1000, size: 100}, // bytes bind
		{rate: 500, bytesRate: 1 << 30, parts: 4, total: 10000, batch: 1000, size: 100},  // records bind
	} {
		name := fmt.Sprintf("%g rec/s %d B/s %d partitions batch %d", tc.rate, tc.bytesRate, tc.parts, tc.batch)
		t.Run(name, func(t *testing.T) {
			th := NewThrottle(plan.Throttle{RecordsPerSecond: tc.rate, BytesPerSecond: plan.ByteSize(tc.bytesRate), MaxBatchWait: plan.Duration(time.Second)})
			stamps := simulate(th, tc.parts, tc.total, tc.batch, tc.size)
			if len(stamps) != tc.total {
				t.Fatalf("%d records let through, want %d", len(stamps), tc.total)
			}
			elapsed := stamps[len(stamps)-1].at.Sub(stamps[0].at).Seconds()
			want := 0.0
			if tc.rate > 0 {
				most, at := maxInWindow(stamps, time.Second, false)
				if limit := tc.rate * 1.1; float64(most) > limit {
					t.Errorf("%d records in the second from %s, want at most %g", most, at.Format("15:04:05.000"), limit)
				}
				want = float64(tc.total) / tc.rate
			}
			if tc.bytesRate > 0 {
				most, at := maxInWindow(stamps, time.Second, true)
				if limit := float64(tc.bytesRate) * 1.1; float64(most) > limit {
					t.Errorf("%d bytes in the second from %s, want at most %g", most, at.Format("15:04:05.000"), limit)
				}
				want = max(want, float64(tc.total*tc.size)/float64(tc.bytesRate))
			}
			if elapsed < want*0.98 || elapsed > want*1.02 {
				t.Errorf("took %.3fs, want %.3fs within 2%%", elapsed, want)
			}
		})
	}
}

// A machine that stalls (GC, a busy CPU) delays writes, which then start
// together: the log of started writes still holds every second to the
// limit plus the burst, and after short stalls the total stays within 2 %.
func TestThrottleStalls(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, stall := range []time.Duration{30 * time.Millisecond, 80 * time.Millisecond, 300 * time.Millisecond} {
		th := NewThrottle(plan.Throttle{RecordsPerSecond: 200, MaxBatchWait: plan.Duration(time.Second)})
		// Every 2 s the machine stalls: what was due in the stall starts at its end.
		stamps := simulateLate(th, 4, 4000, 1000, 10, func(at time.Time) time.Duration {
			in := at.Sub(start) % (2 * time.Second)
			if in < stall {
				return stall - in
			}
			return 0
		})
		most, at := maxInWindow(stamps, time.Second, false)
		if most > 220 {
			t.Errorf("stalls of %s: %d records in the second from %s, want at most 220", stall, most, at.Format("15:04:05.000"))
		}
		// A stall of 300 ms every 2 s loses time the limit does not let the
		// run catch up (it would crowd a second); shorter ones do not.
		if elapsed := stamps[len(stamps)-1].at.Sub(stamps[0].at).Seconds(); stall < 100*time.Millisecond && (elapsed < 20*0.98 || elapsed > 20*1.02) {
			t.Errorf("stalls of %s: took %.3fs, want 20s within 2%%", stall, elapsed)
		}
	}
}

// The log of started writes: a second's worth (the limit plus the burst)
// fits, more waits until the oldest writes are a second old; one write
// above it passes alone.
func TestThrottleSentLog(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := sentLog{max: 105}
	for i := 0; i < 105; i++ {
		if d := l.delay(t0.Add(time.Duration(i)*time.Millisecond), 1); d != 0 {
			t.Fatalf("record %d waits %s, want none", i, d)
		}
		l.add(t0.Add(time.Duration(i)*time.Millisecond), 1)
	}
	now := t0.Add(500 * time.Millisecond)
	if d := l.delay(now, 3); d != 502*time.Millisecond+time.Millisecond {
		t.Errorf("3 more wait %s, want until the third oldest is a second old (503ms)", d)
	}
	if d := l.delay(t0.Add(time.Second+104*time.Millisecond), 105); d != 0 {
		t.Errorf("a full second later, 105 wait %s", d)
	}
	if d := (&sentLog{max: 10}).delay(now, 50); d != 0 {
		t.Errorf("one write above the limit into an empty log waits %s", d)
	}
}

// A partition writes at least every max_batch_wait when the rate spread
// over the partitions allows a record per max_batch_wait each.
func TestThrottleMaxBatchWait(t *testing.T) {
	for _, wait := range []time.Duration{time.Second, 250 * time.Millisecond} {
		th := NewThrottle(plan.Throttle{RecordsPerSecond: 100, MaxBatchWait: plan.Duration(wait)})
		stamps := simulate(th, 20, 2000, 1000, 10)
		last := map[int32]time.Time{}
		for _, s := range stamps {
			if l, ok := last[s.partition]; ok && s.at.Sub(l) > wait+wait/10 {
				t.Errorf("max_batch_wait %s: partition %d wrote nothing for %s", wait, s.partition, s.at.Sub(l))
				break
			}
			last[s.partition] = s.at
		}
	}
}

// A record larger than the bytes burst passes, paid in full.
func TestThrottleRecordAboveBurst(t *testing.T) {
	th := NewThrottle(plan.Throttle{BytesPerSecond: 1000, MaxBatchWait: plan.Duration(time.Second)})
	stamps := simulate(th, 1, 10, 10, 500) // 500 B records, burst 50 B
	if elapsed := stamps[len(stamps)-1].at.Sub(stamps[0].at); elapsed < 4400*time.Millisecond || elapsed > 4600*time.Millisecond {
		t.Errorf("10 records of 500 B at 1000 B/s took %s, want about 4.5s (the first passes at once)", elapsed)
	}
}

// A record larger than a second of the bytes rate, which the bucket held
// back for its full cost, does not hold back the writes after it: 2 MB
// records at 1 MB/s, each followed by a small one, take 2 s a pair.
func TestThrottleRecordAboveLimitHoldsNoSecondMore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := sentLog{max: 1_050_000}
	if d := l.delay(t0, 2_000_000); d != 0 {
		t.Fatalf("a write above the limit into an empty log waits %s", d)
	}
	l.add(t0, 2_000_000)
	if d := l.delay(t0.Add(time.Millisecond), 200); d != 0 {
		t.Errorf("a 200 B write just after a 2 MB one waits %s, want none (the bucket paced the 2 MB)", d)
	}
}

// Writes above the limit that start together after a stall (the machine
// paused while their reservations came due) are still held a second
// apart by the log: 2 MB records at 1 MB/s never start two in a second.
func TestThrottleRecordsAboveLimitAfterStallStartASecondApart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := NewThrottle(plan.Throttle{BytesPerSecond: 1_000_000, MaxBatchWait: plan.Duration(time.Second)})
	th.now = func() time.Time { return t0 }
	if err := th.admit(t.Context(), 1, 2_000_000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := th.admit(ctx, 1, 2_000_000); err == nil {
		t.Errorf("a second 2 MB write started in the same instant as another at 1 MB/s")
	}
	if d := th.bytesSent.delay(t0.Add(time.Millisecond), 200); d != 0 {
		t.Errorf("a 200 B write just after a 2 MB one waits %s, want none", d)
	}
}
