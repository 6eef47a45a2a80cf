package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
)

// stamp is one record that reached a sink at a time.
type stamp struct {
	at        time.Time
	partition int32
	offset    int64
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

// Under --join a member's share is that of the plan's offsets in its
// ranges, not of the partitions: the member of the one partition holding
// 90 % of the offsets takes 90 % of the limit, so both finish together.
func TestThrottleShareSkewed(t *testing.T) {
	res := &Resolution{Topic: "orders", Ranges: []Range{{Partition: 0, Start: 100, End: 1000}, {Partition: 1, End: 50}, {Partition: 2, Start: 10, End: 60}}}
	lim := plan.Throttle{RecordsPerSecond: 1000}
	for _, tc := range []struct {
		parts []int
		want  float64
	}{{[]int{0}, 900}, {[]int{1, 2}, 100}, {[]int{0, 1, 2}, 1000}} {
		var states []*worker.State
		for _, p := range tc.parts {
			states = append(states, newState("orders", res.Ranges[p], res.Ranges[p].Start))
		}
		mine, all := res.offsetsOf(states, nil)
		if got := throttleShare(lim, mine, all).RecordsPerSecond; got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("partitions %v: %g records/s, want %g", tc.parts, got, tc.want)
		}
	}
}

// On a resume (or a rebalance mid-run) a member's share is that of the
// offsets left to read: the member of a partition the group already
// finished takes nothing from the others, and the member of the only
// partition left takes the whole limit, instead of its range's part.
func TestThrottleShareResumed(t *testing.T) {
	res := &Resolution{Topic: "orders", Fingerprint: "f1", Ranges: []Range{{Partition: 0, End: 900}, {Partition: 1, End: 100}}}
	lim := plan.Throttle{RecordsPerSecond: 1000}
	for _, tc := range []struct {
		done0 int64 // partition 0's checkpoint in the group
		part  int
		want  float64
	}{{900, 1, 1000}, {800, 1, 500}, {800, 0, 500}, {-1, 1, 100}} {
		cps := map[int32]group.Checkpoint{
			0: {Partition: 0, Offset: tc.done0, Replay: tc.done0 >= 0, Fingerprint: "f1", End: 900},
			1: {Partition: 1, Offset: -1},
		}
		from := res.Ranges[tc.part].Start
		if cp := cps[int32(tc.part)]; cp.Offset > from {
			from = cp.Offset
		}
		mine, all := res.offsetsOf([]*worker.State{newState("orders", res.Ranges[tc.part], from)}, cps)
		if got := throttleShare(lim, mine, all).RecordsPerSecond; got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("partition 0 checkpointed at %d, member of partition %d: %g records/s, want %g", tc.done0, tc.part, got, tc.want)
		}
	}
}

// The plan's limit is the whole group's under --join: a member takes the
// share of the offsets it was assigned.
func TestThrottleShare(t *testing.T) {
	lim := plan.Throttle{RecordsPerSecond: 1000, BytesPerSecond: 10 << 20, MaxBatchWait: plan.Duration(time.Second)}
	for _, tc := range []struct {
		assigned, total int64
		records         float64
		bytes           int64
	}{
		{6, 6, 1000, 10 << 20},
		{3, 6, 500, 5 << 20},
		{1, 6, 1000.0 / 6, (10 << 20) / 6},
		{2, 3, 2000.0 / 3, (10 << 20) * 2 / 3},
		{0, 6, 1e-3, 1}, // nothing assigned: never unlimited
	} {
		got := throttleShare(lim, tc.assigned, tc.total)
		if diff := got.RecordsPerSecond - tc.records; diff > 1e-9 || diff < -1e-9 || int64(got.BytesPerSecond) != tc.bytes || got.MaxBatchWait != lim.MaxBatchWait {
			t.Errorf("%d of %d partitions: share %+v, want %g records/s and %d bytes/s", tc.assigned, tc.total, got, tc.records, tc.bytes)
		}
	}
	// The shares of a group add up to the limit.
	var sum float64
	for _, a := range []int64{2, 3, 1} {
		sum += throttleShare(lim, a, 6).RecordsPerSecond
	}
	if sum < 999.999 || sum > 1000.001 {
		t.Errorf("the members' shares add up to %g, want 1000", sum)
	}
	if got := throttleShare(plan.Throttle{BytesPerSecond: 10}, 1, 100); got.BytesPerSecond != 1 || got.RecordsPerSecond != 0 {
		t.Errorf("a tiny bytes share: %+v, want 1 B/s and records unlimited", got)
	}
}

// stampSink timestamps every record a Write hands it.
type stampSink struct {
	mu     sync.Mutex
	stamps []stamp
}

func (s *stampSink) Write(_ context.Context, recs []record.Record) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.stamps = append(s.stamps, stamp{at: now, partition: r.Partition, offset: r.Offset, size: len(r.Key) + len(r.Value)})
	}
	return nil
}
func (s *stampSink) Finish(context.Context) error     { return nil }
func (s *stampSink) Close() error                     { return nil }
func (s *stampSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// runThrottled replays parts partitions of perPart records each at rate
// records/s into a stampSink and checks every sliding second and the
// total time, which must lie in [minTotal, maxTotal].
func runThrottled(t *testing.T, parts int32, perPart int, rate float64, minTotal, maxTotal time.Duration) {
	sb := newTestCluster(t, parts, "orders")
	seed(t, sb, "orders", int(parts)*perPart, t0, time.Hour)
	p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: throttle
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.throttle
window: {offsets: {all: {from: earliest, to: latest}}}
throttle: {records_per_second: %g}
sink: {type: file, path: unused.jsonl}
`, rate))
	sink := &stampSink{}
	start := time.Now()
	if _, _, err := runPlan(t, context.Background(), p, sink); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got, want := len(sink.stamps), int(parts)*perPart; got != want {
		t.Fatalf("%d records written, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, s := range sink.stamps {
		k := strconv.Itoa(int(s.partition)) + "/" + strconv.FormatInt(s.offset, 10)
		if seen[k] {
			t.Fatalf("record %s written twice", k)
		}
		seen[k] = true
	}
	most, at := maxInWindow(sink.stamps, time.Second, false)
	limit := rate * 1.1 // the limit plus the burst, a tenth of a second of it
	t.Logf("%d records over %d partitions at %g/s: %s, busiest second %d records (from %s)", len(sink.stamps), parts, rate, took.Round(time.Millisecond), most, at.Format("15:04:05.000"))
	if float64(most) > limit {
		t.Errorf("%d records reached the sink in the second from %s, want at most %g", most, at.Format("15:04:05.000"), limit)
	}
	first, last := sink.stamps[0].at, sink.stamps[len(sink.stamps)-1].at
	if d := last.Sub(first); d < minTotal || d > maxTotal {
		t.Errorf("the records reached the sink over %s, want %s to %s", d.Round(time.Millisecond), minTotal, maxTotal)
	}
}

// The throttle holds in every second of a real run: 4 partitions at
// 200 records/s for about 5 s (the default batch of 1000 is cut). The
// total may run late on a loaded machine, never early.
func TestThrottleRunEverySecond(t *testing.T) {
	// 1000 records at 200/s: 5 s less the burst let through at once.
	runThrottled(t, 4, 250, 200, 4850*time.Millisecond, 7*time.Second)
}

// The long version: 4 partitions × 2500 records at 100 records/s, about
// 100 s. Set REPLAY_THROTTLE_SOAK=1 to run it.
func TestThrottleRunEverySecondLong(t *testing.T) {
	if os.Getenv("REPLAY_THROTTLE_SOAK") == "" {
		t.Skip("set REPLAY_THROTTLE_SOAK=1 for the 100 s throttle run")
	}
	runThrottled(t, 4, 2500, 100, 99*time.Second, 102*time.Second)
}
