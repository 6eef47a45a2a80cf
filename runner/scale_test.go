package runner

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// requestCounter counts the requests a kfake cluster receives, by key,
// through its control hooks; ApiVersions counts the new connections (every
// client opens a connection with it).
type requestCounter struct {
	mu sync.Mutex
	n  map[kmsg.Key]int
}

func countRequests(c *kfake.Cluster, keys ...kmsg.Key) *requestCounter {
	rc := &requestCounter{n: map[kmsg.Key]int{}}
	for _, k := range keys {
		c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			rc.mu.Lock()
			rc.n[k]++
			rc.mu.Unlock()
			return nil, nil, false
		})
	}
	return rc
}

// reset zeroes the counts and returns them.
func (rc *requestCounter) reset() map[kmsg.Key]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := rc.n
	rc.n = map[kmsg.Key]int{}
	return n
}

// scalePartitions is the partition count of TestScaleRequests.
const scalePartitions = 1500

// TestScaleRequests replays a window of 1500 partitions (three brokers, a
// few records each, so each partition commits once: one round) into
// PostgreSQL and counts what the broker receives. A commit per partition
// would be 1500 OffsetCommit requests and as many FindCoordinator; the
// commits are coalesced (commitBatcher), the coordinator is cached and
// ListOffsets goes once per leader.
func TestScaleRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("1500 partitions")
	}
	dsn := testenv.Postgres(t)
	k := testenv.NewKafka(t, testenv.Partitions(scalePartitions), testenv.Topics("orders"), testenv.Kfake(kfake.NumBrokers(3)))
	var recs []*kgo.Record
	for p := range int32(scalePartitions) {
		for i := range 3 {
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d-%d", p, i)), Value: []byte(`{"id":1}`)})
		}
	}
	k.Produce(t, "orders", recs...)
	rc := countRequests(k.Cluster, kmsg.OffsetCommit, kmsg.FindCoordinator, kmsg.ListOffsets, kmsg.Metadata, kmsg.ApiVersions, kmsg.Fetch)
	p := testPlanAt(t, k.Addr, fmt.Sprintf(`
version: 1
name: scale
source: {brokers: ["%s"], topic: orders}
group: replay.scale
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: postgres, dsn: "%s", table: scale, create_table: true, batch_size: 1000}
`, k.Addr, dsn))
	c, err := Connect(t.Context(), p.Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	job, err := Prepare(t.Context(), c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	prep := rc.reset()
	s, err := registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: job.RunID()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	rep, err := job.Run(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	run := rc.reset()
	_, written, _ := rep.Totals()
	t.Logf("%d partitions, %d records in %s", scalePartitions, written, time.Since(start).Round(time.Millisecond))
	t.Logf("prepare: ListOffsets %d, Metadata %d, FindCoordinator %d, OffsetCommit %d, new connections %d",
		prep[kmsg.ListOffsets], prep[kmsg.Metadata], prep[kmsg.FindCoordinator], prep[kmsg.OffsetCommit], prep[kmsg.ApiVersions])
	t.Logf("run: OffsetCommit %d, FindCoordinator %d, ListOffsets %d, Metadata %d, Fetch %d, new connections %d",
		run[kmsg.OffsetCommit], run[kmsg.FindCoordinator], run[kmsg.ListOffsets], run[kmsg.Metadata], run[kmsg.Fetch], run[kmsg.ApiVersions])
	if written != int64(len(recs)) {
		t.Fatalf("wrote %d records, want %d", written, len(recs))
	}
	// One round: every partition commits once. Coalesced, that is one
	// request per commitLinger tick (50 ms) while the partitions finish,
	// far below one per partition.
	if n := run[kmsg.OffsetCommit]; n > scalePartitions/5 {
		t.Errorf("%d OffsetCommit requests for one round of %d partitions, want at most %d", n, scalePartitions, scalePartitions/5)
	}
	if n := run[kmsg.FindCoordinator]; n > 3 {
		t.Errorf("%d FindCoordinator requests in the run, want the coordinator cached (at most 3)", n)
	}
	if n := prep[kmsg.ListOffsets]; n > 3*3*2 {
		t.Errorf("%d ListOffsets requests to resolve %d partitions on 3 brokers, want at most one per broker and kind (%d)", n, scalePartitions, 3*3*2)
	}
	var parts []int32
	for _, r := range job.Resolution.Ranges {
		parts = append(parts, r.Partition)
	}
	cps := commits(t, c, p.Group, "orders", parts...)
	for _, r := range job.Resolution.Ranges {
		if cps[r.Partition].Offset != r.End {
			t.Fatalf("partition %d committed at %d, want %d", r.Partition, cps[r.Partition].Offset, r.End)
		}
	}
}
