package group

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source"
)

// TestCommitBatcherCoalesces: 40 partitions committing increasing offsets
// concurrently share requests; a request carries each partition at most
// once, a partition never has two commits in flight, its offsets reach the
// coordinator in order, and each commit gets its request's answer. The
// clock is synctest's: the coordinator's answer time and the linger are
// virtual, the interleaving the same on any machine.
func TestCommitBatcherCoalesces(t *testing.T) { synctest.Test(t, testCommitBatcherCoalesces) }

func testCommitBatcherCoalesces(t *testing.T) {
	const parts, rounds = 40, 10
	var mu sync.Mutex
	inflight := map[int32]bool{}
	last := map[int32]int64{}
	var bad []string
	b := &Batcher{Linger: LingerFor(parts), Send: func(ctx context.Context, m *source.Member, _ string, offsets map[int32]int64, meta map[int32]Meta) error {
		mu.Lock()
		for p, off := range offsets {
			if inflight[p] {
				bad = append(bad, "two commits in flight")
			}
			if off < last[p] {
				bad = append(bad, "offset decreased")
			}
			if meta[p].End != int64(p) {
				bad = append(bad, "metadata of another partition")
			}
			inflight[p], last[p] = true, off
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the coordinator's answer
		mu.Lock()
		for p := range offsets {
			inflight[p] = false
		}
		mu.Unlock()
		if offsets[7] == 5 {
			return errors.New("refused")
		}
		return nil
	}}
	var wg sync.WaitGroup
	errs := make([]int, parts)
	for p := range int32(parts) {
		wg.Go(func() {
			for i := range int64(rounds) {
				if err := b.Commit(context.Background(), nil, record.TopicPartition{Topic: "orders", Partition: p}, i+1, Meta{End: int64(p)}); err != nil {
					errs[p]++
				}
			}
		})
	}
	wg.Wait()
	for _, s := range bad {
		t.Error(s)
	}
	if n := b.Requests(); n >= parts*rounds/4 {
		t.Errorf("%d requests for %d commits, want them coalesced", n, parts*rounds)
	}
	if errs[7] != 1 {
		t.Errorf("partition 7 saw %d errors, want the one of its refused request", errs[7])
	}
	for p := range int32(parts) {
		if last[p] != rounds {
			t.Errorf("partition %d last committed %d, want %d", p, last[p], rounds)
		}
	}
	t.Logf("%d commits in %d requests", parts*rounds, b.Requests())
	time.Sleep(time.Second) // virtual: the batcher's loop lingers, finds nothing and ends
	synctest.Wait()
}

// TestCommitBatcherKeepsMembersApart: commits made as different members
// (a rebalance between them) never share a request.
func TestCommitBatcherKeepsMembersApart(t *testing.T) {
	synctest.Test(t, testCommitBatcherKeepsMembersApart)
}

func testCommitBatcherKeepsMembersApart(t *testing.T) {
	m1, m2 := &source.Member{Generation: 1, ID: "a"}, &source.Member{Generation: 2, ID: "a"}
	var mu sync.Mutex
	var mixed bool
	seen := map[*source.Member]int{}
	b := &Batcher{Linger: 20 * time.Millisecond, Send: func(ctx context.Context, m *source.Member, _ string, offsets map[int32]int64, _ map[int32]Meta) error {
		mu.Lock()
		defer mu.Unlock()
		for p := range offsets {
			if (p%2 == 0) != (m == m1) {
				mixed = true
			}
		}
		seen[m]++
		return nil
	}}
	var wg sync.WaitGroup
	for p := range int32(6) {
		wg.Go(func() {
			m := m2
			if p%2 == 0 {
				m = m1
			}
			_ = b.Commit(context.Background(), m, record.TopicPartition{Topic: "orders", Partition: p}, 1, Meta{})
		})
	}
	wg.Wait()
	if mixed || seen[m1] == 0 || seen[m2] == 0 {
		t.Errorf("members mixed in a request: %v, requests per member %v", mixed, seen)
	}
	time.Sleep(time.Second) // virtual: the batcher's loop lingers, finds nothing and ends
	synctest.Wait()
}

// TestCommitBatcherKeepsTopicsApart: the commits of two topics never
// share a request (an OffsetCommit request names one topic's partitions
// here), and partition 0 of one topic does not hold back partition 0 of
// the other.
func TestCommitBatcherKeepsTopicsApart(t *testing.T) {
	synctest.Test(t, testCommitBatcherKeepsTopicsApart)
}

func testCommitBatcherKeepsTopicsApart(t *testing.T) {
	var mu sync.Mutex
	got := map[string]map[int32]int64{}
	requests := 0
	b := &Batcher{Linger: 20 * time.Millisecond, Send: func(ctx context.Context, _ *source.Member, topic string, offsets map[int32]int64, meta map[int32]Meta) error {
		mu.Lock()
		defer mu.Unlock()
		requests++
		for p, off := range offsets {
			if meta[p].Plan != topic {
				t.Errorf("%s/%d committed with the metadata of %s", topic, p, meta[p].Plan)
			}
			if got[topic] == nil {
				got[topic] = map[int32]int64{}
			}
			got[topic][p] = off
		}
		return nil
	}}
	var wg sync.WaitGroup
	for _, topic := range []string{"orders", "audit"} {
		for p := range int32(3) {
			wg.Go(func() {
				if err := b.Commit(context.Background(), nil, record.TopicPartition{Topic: topic, Partition: p}, int64(len(topic))+int64(p), Meta{Plan: topic}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for _, topic := range []string{"orders", "audit"} {
		for p := range int32(3) {
			if want := int64(len(topic)) + int64(p); got[topic][p] != want {
				t.Errorf("%s/%d: committed %d, want %d", topic, p, got[topic][p], want)
			}
		}
	}
	if requests != 2 {
		t.Errorf("%d requests for the commits of two topics made at once, want one per topic", requests)
	}
	time.Sleep(time.Second) // virtual: the batcher's loop lingers, finds nothing and ends
	synctest.Wait()
}

// Requests is how many requests the batcher sent.
func (b *Batcher) Requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}
