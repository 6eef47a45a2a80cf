package runner

import (
	"context"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
)

// sampleRange finds the last record below the end, not the last offset:
// ranges that end on transaction markers or (under read_committed) on
// aborted data search backwards past them. Layout: seedTxns.
func TestSampleRangeEnds(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seedTxns(t, sb)
	p, _ := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}}")
	c := connect(t, p)
	tests := []struct {
		name        string
		iso         string
		part        int32
		from, end   int64
		k           int
		first, last int64 // -1: no record
		sampled     int
		exact       bool
	}{
		{"whole partition", plan.ReadCommitted, 0, 0, p0HWM, 100, 0, 10, 6, true},
		{"ends on commit marker", plan.ReadCommitted, 0, 0, p0Marker + 1, 2, 0, 8, 3, false},
		{"ends on aborted data and its marker", plan.ReadCommitted, 0, 0, 6, 2, 0, 1, 2, true},
		{"aborted data counts under read_uncommitted", plan.ReadUncommitted, 0, 0, 6, 2, 0, 4, 3, false},
		{"only a marker", plan.ReadCommitted, 0, 5, 6, 2, -1, -1, 0, true},
		{"only aborted data", plan.ReadCommitted, 0, 2, 6, 2, -1, -1, 0, true},
		{"empty range", plan.ReadCommitted, 0, 4, 4, 2, -1, -1, 0, true},
		{"log ends in a marker", plan.ReadCommitted, 1, 0, p1HWM, 1, 0, 2, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.sampleRange(context.Background(), "orders", tt.part, tt.iso, tt.from, tt.end, tt.k)
			if err != nil {
				t.Fatal(err)
			}
			if got := offsetOf(s.First); got != tt.first {
				t.Errorf("first record %d, want %d", got, tt.first)
			}
			if got := offsetOf(s.Last); got != tt.last {
				t.Errorf("last record %d, want %d", got, tt.last)
			}
			if s.Sampled != tt.sampled || s.Exact != tt.exact {
				t.Errorf("sampled %d (exact %v), want %d (exact %v)", s.Sampled, s.Exact, tt.sampled, tt.exact)
			}
			if s.Last != nil && !s.Last.Timestamp.Equal(t0.Add(time.Duration(lastIndex(tt.part, s.Last.Offset))*time.Minute)) {
				t.Errorf("last record time %s", s.Last.Timestamp)
			}
		})
	}
}

// lastIndex maps an offset of the seedTxns layout to the producer's record
// count at that record (its timestamp is t0 + index minutes).
func lastIndex(part int32, off int64) int {
	if part == 1 {
		return map[int64]int{0: 9, 1: 10, 2: 11}[off]
	}
	return map[int64]int{0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 6: 5, 7: 6, 8: 7, 10: 8}[off]
}

func offsetOf(r *RecordInfo) int64 {
	if r == nil {
		return -1
	}
	return r.Offset
}

// Every record of a small range is read, so its bytes are a sum; a large
// range is estimated from both ends, the average times the offsets.
func TestSampleBytes(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seedTxns(t, sb)
	p, _ := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}}")
	c := connect(t, p)
	s, err := c.sampleRange(context.Background(), "orders", 0, plan.ReadCommitted, 0, p0HWM, 100)
	if err != nil {
		t.Fatal(err)
	}
	// plain-0, plain-1, committed-a..c, plain-2: values only, no keys.
	if want := int64(7 + 7 + 3*11 + 7); s.Bytes != want || !s.Exact {
		t.Errorf("bytes %d (exact %v), want %d exact", s.Bytes, s.Exact, want)
	}
	s, err = c.sampleRange(context.Background(), "orders", 0, plan.ReadCommitted, 0, p0HWM, 1)
	if err != nil {
		t.Fatal(err)
	}
	// head plain-0, tail plain-2: 7 bytes on average over 11 offsets.
	if s.Bytes != 77 || s.Exact || s.Sampled != 2 {
		t.Errorf("bytes %d (exact %v, sampled %d), want ~77 from 2 records", s.Bytes, s.Exact, s.Sampled)
	}
}

func TestETA(t *testing.T) {
	tests := []struct {
		name           string
		throttle       plan.Throttle
		records, bytes int64
		want           time.Duration
		ok             bool
	}{
		{"unthrottled", plan.Throttle{}, 1000, 1 << 20, 0, false},
		{"records", plan.Throttle{RecordsPerSecond: 100}, 1000, 1 << 20, 10 * time.Second, true},
		{"bytes", plan.Throttle{BytesPerSecond: 1 << 10}, 1000, 1 << 20, 1024 * time.Second, true},
		{"records slower", plan.Throttle{RecordsPerSecond: 10, BytesPerSecond: 1 << 20}, 1000, 1 << 20, 100 * time.Second, true},
		{"bytes slower", plan.Throttle{RecordsPerSecond: 1000, BytesPerSecond: 1 << 10}, 1000, 1 << 20, 1024 * time.Second, true},
		{"rounded up", plan.Throttle{RecordsPerSecond: 3}, 10, 0, 4 * time.Second, true},
		{"nothing", plan.Throttle{RecordsPerSecond: 3}, 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ETA(tt.throttle, tt.records, tt.bytes)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ETA = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
