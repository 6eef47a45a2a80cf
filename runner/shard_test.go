package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/sinks/registry"
)

func shardRes(ranges ...[3]int64) *Resolution {
	res := &Resolution{Plan: "p", Fingerprint: "fp", Topic: "t", Group: "replay.p"}
	for _, r := range ranges {
		res.Ranges = append(res.Ranges, Range{Partition: int32(r[0]), Start: r[1], End: r[2], Outcome: InRange})
	}
	return res
}

// coverage returns, per partition, the offsets the shards hold, failing
// the test on an offset held twice.
func coverage(t *testing.T, s *ShardSet) map[int32]int64 {
	t.Helper()
	held := map[string]bool{}
	n := map[int32]int64{}
	for _, sh := range s.Shards {
		for _, sr := range sh.Ranges {
			for o := sr.Start; o < sr.End; o++ {
				k := fmt.Sprint(sr.Partition, "/", o)
				if held[k] {
					t.Fatalf("offset %s is in two shards", k)
				}
				held[k] = true
			}
			n[sr.Partition] += sr.Records()
		}
	}
	return n
}

func TestSplitShardsEven(t *testing.T) {
	for _, tc := range []struct {
		name   string
		res    *Resolution
		count  int
		spread int64 // largest minus smallest shard, in offsets
	}{
		{"four equal partitions in four", shardRes([3]int64{0, 0, 100}, [3]int64{1, 0, 100}, [3]int64{2, 0, 100}, [3]int64{3, 0, 100}), 4, 0},
		{"skewed: one partition with 80 percent", shardRes([3]int64{0, 10, 810}, [3]int64{1, 5, 75}, [3]int64{2, 0, 65}, [3]int64{3, 0, 65}), 4, 1},
		{"more shards than partitions", shardRes([3]int64{0, 1000, 1007}, [3]int64{1, 0, 3}), 3, 1},
		{"empty ranges take no shard", shardRes([3]int64{0, 5, 5}, [3]int64{1, 0, 9}, [3]int64{2, 7, 7}), 2, 1},
		{"one shard", shardRes([3]int64{0, 0, 10}, [3]int64{1, 0, 10}), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := SplitShards(tc.res, tc.count, false, nil); err != nil {
				t.Fatal(err)
			}
			s := tc.res.Shards
			if s.Count != tc.count || len(s.Shards) != tc.count {
				t.Fatalf("count %d, %d shards: want %d", s.Count, len(s.Shards), tc.count)
			}
			if err := s.check(tc.res.Ranges); err != nil {
				t.Fatalf("the split does not cover the ranges once: %v", err)
			}
			got := coverage(t, s)
			for _, r := range tc.res.Ranges {
				if got[r.Partition] != r.Records() {
					t.Errorf("partition %d: shards hold %d offsets of its %d", r.Partition, got[r.Partition], r.Records())
				}
			}
			lo, hi := s.Shards[0].Records, s.Shards[0].Records
			for i, sh := range s.Shards {
				lo, hi = min(lo, sh.Records), max(hi, sh.Records)
				if want := ShardGroup("replay.p", i, tc.count); sh.Group != want || sh.Index != i {
					t.Errorf("shard %d: index %d group %q, want group %q", i, sh.Index, sh.Group, want)
				}
			}
			if hi-lo > tc.spread {
				t.Errorf("shards of %d to %d offsets: want at most %d apart", lo, hi, tc.spread)
			}
		})
	}
}

// TestSplitShardsSkewedWithinRatio: the spread a reviewer sees for a
// skewed topic, one partition holding 80 % of the window: within 1.3x.
func TestSplitShardsSkewedWithinRatio(t *testing.T) {
	res := shardRes([3]int64{0, 0, 80000}, [3]int64{1, 0, 6667}, [3]int64{2, 0, 6667}, [3]int64{3, 0, 6666})
	bytes := map[int32]int64{0: 8_000_000, 1: 666_700, 2: 666_700, 3: 666_600}
	if err := SplitShards(res, 4, false, bytes); err != nil {
		t.Fatal(err)
	}
	lo, hi := int64(1<<62), int64(0)
	for _, sh := range res.Shards.Shards {
		lo, hi = min(lo, sh.Records), max(hi, sh.Records)
		if sh.Bytes < sh.Records*99 || sh.Bytes > sh.Records*101 {
			t.Errorf("shard %d: %d bytes estimated for %d records of 100 bytes", sh.Index, sh.Bytes, sh.Records)
		}
	}
	if float64(hi) > 1.3*float64(lo) {
		t.Errorf("shards of %d to %d records: more than 1.3x apart", lo, hi)
	}
}

func TestSplitShardsWholePartitions(t *testing.T) {
	res := shardRes([3]int64{0, 0, 50}, [3]int64{1, 0, 40}, [3]int64{2, 0, 30}, [3]int64{3, 0, 20}, [3]int64{4, 0, 10}, [3]int64{5, 3, 3})
	if err := SplitShards(res, 2, true, nil); err != nil {
		t.Fatal(err)
	}
	s := res.Shards
	if !s.WholePartitions {
		t.Error("whole_partitions not recorded")
	}
	if err := s.check(res.Ranges); err != nil {
		t.Fatal(err)
	}
	for _, sh := range s.Shards {
		for _, sr := range sh.Ranges {
			if r, _ := res.rangeOf(sr.Partition); sr.Start != r.Start || sr.End != r.End {
				t.Errorf("shard %d splits partition %d: [%d, %d) of [%d, %d)", sh.Index, sr.Partition, sr.Start, sr.End, r.Start, r.End)
			}
		}
	}
	// Largest first to the lighter shard: 50 | 40, 30 -> 50+20 | 40+30, 10 -> 80 | 70.
	if a, b := s.Shards[0].Records, s.Shards[1].Records; a != 80 || b != 70 {
		t.Errorf("shards of %d and %d offsets, want 80 and 70", a, b)
	}
}

func TestShardFingerprintCatchesEdits(t *testing.T) {
	res := shardRes([3]int64{0, 0, 100}, [3]int64{1, 0, 100})
	if err := SplitShards(res, 2, false, nil); err != nil {
		t.Fatal(err)
	}
	fp := res.Shards.Fingerprint
	if ShardFingerprint(res) != fp {
		t.Fatal("the fingerprint of an unchanged file differs")
	}
	edits := map[string]func(r *Resolution){
		"a sub-range end": func(r *Resolution) { r.Shards.Shards[0].Ranges[0].End-- },
		"a range":         func(r *Resolution) { r.Ranges[1].End++ },
		"a shard's group": func(r *Resolution) { r.Shards.Shards[1].Group = "replay.other" },
		"the plan":        func(r *Resolution) { r.Fingerprint = "other" },
	}
	for name, edit := range edits {
		c := *res
		c.Ranges = append([]Range(nil), res.Ranges...)
		sh := *res.Shards
		sh.Shards = append([]Shard(nil), res.Shards.Shards...)
		for i := range sh.Shards {
			sh.Shards[i].Ranges = append([]SubRange(nil), sh.Shards[i].Ranges...)
		}
		c.Shards = &sh
		edit(&c)
		if ShardFingerprint(&c) == fp {
			t.Errorf("editing %s keeps the fingerprint", name)
		}
	}
}

func TestShardSetCheckRefusesBadCover(t *testing.T) {
	ranges := []Range{{Partition: 0, Start: 0, End: 10}, {Partition: 1, Start: 0, End: 10}}
	for name, s := range map[string]*ShardSet{
		"overlap": {Count: 2, Shards: []Shard{{Index: 0, Ranges: []SubRange{{0, 0, 6}, {1, 0, 10}}}, {Index: 1, Ranges: []SubRange{{0, 5, 10}}}}},
		"gap":     {Count: 2, Shards: []Shard{{Index: 0, Ranges: []SubRange{{0, 0, 4}, {1, 0, 10}}}, {Index: 1, Ranges: []SubRange{{0, 5, 10}}}}},
		"beyond":  {Count: 1, Shards: []Shard{{Index: 0, Ranges: []SubRange{{0, 0, 11}, {1, 0, 10}}}}},
		"count":   {Count: 3, Shards: []Shard{{Index: 0, Ranges: []SubRange{{0, 0, 10}, {1, 0, 10}}}}},
		"unknown": {Count: 1, Shards: []Shard{{Index: 0, Ranges: []SubRange{{0, 0, 10}, {1, 0, 10}, {2, 0, 1}}}}},
	} {
		if err := s.check(ranges); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string][2]int{"0/4": {0, 4}, "3/4": {3, 4}, "0/1": {0, 1}} {
		i, n, err := ParseShard(in)
		if err != nil || i != want[0] || n != want[1] {
			t.Errorf("ParseShard(%q) = %d, %d, %v", in, i, n, err)
		}
	}
	for _, in := range []string{"4/4", "-1/4", "1", "a/b", "1/0", "", "1/4/2"} {
		if _, _, err := ParseShard(in); err == nil || !strings.Contains(err.Error(), "I/N") {
			t.Errorf("ParseShard(%q): %v, want the I/N usage", in, err)
		}
	}
}

func TestForShardRefusesEditedFile(t *testing.T) {
	out := t.TempDir() + "/out-{shard}.jsonl"
	p := testPlanAt(t, "", fmt.Sprintf(`version: 1
name: sharded
source: {brokers: ["127.0.0.1:9092"], topic: orders}
group: replay.sharded
window: {from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z"}
throttle: {records_per_second: 1000}
sink: {type: file, path: %q}
`, out))
	res := shardRes([3]int64{0, 0, 100}, [3]int64{1, 0, 100})
	res.Plan, res.Fingerprint, res.Topic, res.Group = p.Name, p.Fingerprint(), p.Source.Topic, p.Group
	if err := SplitShards(res, 2, false, nil); err != nil {
		t.Fatal(err)
	}
	run, err := ForShard(p, res, 1, 2, registry.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if run.Plan.Group != ShardGroup(p.Group, 1, 2) || run.Resolution.Group != run.Plan.Group || run.Resolution.Fingerprint != run.Plan.Fingerprint() {
		t.Errorf("shard plan group %q, resolution group %q fingerprint %q (plan's %q)", run.Plan.Group, run.Resolution.Group, run.Resolution.Fingerprint, run.Plan.Fingerprint())
	}
	// Partition 0 is shard 0's: shard 1 has it as an empty range at its
	// end (the window's partition, nothing of it to replay).
	if rs := run.Resolution.Ranges; len(rs) != 2 || rs[0].Partition != 0 || rs[0].Start != 100 || rs[0].End != 100 ||
		rs[1].Partition != 1 || rs[1].Start != 0 || rs[1].End != 100 {
		t.Errorf("shard 1 ranges %+v, want partition 0 [100, 100) and partition 1 [0, 100)", run.Resolution.Ranges)
	}
	// The records field is for review: the throttle share comes from the
	// sub-ranges, so an edited count changes nothing.
	res.Shards.Shards[1].Records = 1_000_000
	if edited, err := ForShard(p, res, 1, 2, registry.Catalog()); err != nil || edited.Plan.Throttle.RecordsPerSecond != 500 {
		t.Errorf("an edited records field: %v, throttle %v, want 500", err, edited.Plan.Throttle.RecordsPerSecond)
	}
	res.Shards.Shards[1].Records = 100
	if p.Group == run.Plan.Group {
		t.Error("ForShard changed the caller's plan")
	}
	if run.Plan.Throttle.RecordsPerSecond != 500 {
		t.Errorf("shard 1 of 2 equal shards throttled at %v records/s, want half the plan's 1000", run.Plan.Throttle.RecordsPerSecond)
	}
	res.Shards.Shards[1].Ranges[0].End = 90
	_, err = ForShard(p, res, 1, 2, registry.Catalog())
	var se *fault.SafetyError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "edited") {
		t.Errorf("an edited file: %v, want a refusal saying it was edited", err)
	}
	res.Shards.Shards[1].Ranges[0].End = 100
	if _, err := ForShard(p, res, 0, 3, registry.Catalog()); err == nil || !strings.Contains(err.Error(), "has 2 shards") {
		t.Errorf("--shard 0/3 of a file of 2: %v", err)
	}
}
