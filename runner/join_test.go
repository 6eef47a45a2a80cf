package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/registry"
)

// joinPlan is a plan over every record of a 4-partition topic into
// PostgreSQL, throttled so that a run lasts a few seconds, with its ranges
// resolved once (the resolution every joining process is given).
func joinPlan(t *testing.T, records int, rate int) (*Resolution, func(t *testing.T) *Job, dbTarget) {
	t.Helper()
	sb := newTestCluster(t, 4, "orders")
	seed(t, sb, "orders", records, t0, time.Hour)
	db := postgresTarget(t)
	s := db.sink(t)
	section := plan.ConfigOf[postgres.Section](&s)
	p := testPlan(t, sb, `
version: 1
name: joined
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.joined
window: {offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}, 2: {from: earliest, to: latest}, 3: {from: earliest, to: latest}}}
throttle: {records_per_second: `+strconv.Itoa(rate)+`}
sink: {type: postgres, dsn: "`+section.DSN+`", table: `+section.Table+`, create_table: true, batch_size: 100}
`)
	first, err := Prepare(t.Context(), connect(t, p), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	member := func(t *testing.T) *Job {
		opts := testOptions(t)
		opts.Join, opts.Pinned, opts.Heartbeat = true, first.Resolution, 200*time.Millisecond
		job, err := Prepare(t.Context(), connect(t, p), p, opts)
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	return first.Resolution, member, db
}

func openSink(t *testing.T, job *Job) sinks.Sink {
	t.Helper()
	s, err := registry.New(t.Context(), job.Plan.Sink, sinks.Options{PlanName: job.Plan.Name, RunID: job.RunID(), Group: job.Plan.Group, Fingerprint: job.Resolution.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two processes of one plan share it through the replay group (run --join,
// the group protocol): Kafka spreads the partitions between them, both finish when
// every partition is done, and the table holds every record of the window
// once, with every partition committed at its end.
func TestJoinedMembersShareThePlan(t *testing.T) {
	res, member, db := joinPlan(t, 8000, 2500)
	var mu sync.Mutex
	did := map[int32][]int{} // partition -> members that wrote to it
	g, ctx := errgroup.WithContext(t.Context())
	for i := range 2 {
		job := member(t)
		sink := openSink(t, job)
		g.Go(func() error {
			if i == 1 { // the first is running (in the group) when the second joins
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				if err := testenv.WaitFor(wctx, 20*time.Millisecond, func() bool { return group.CheckIdle(wctx, job.c.Cluster, job.Plan.Group) != nil }); err != nil {
					return fmt.Errorf("the first member never joined: %w", err)
				}
			}
			rep, err := job.RunJoined(ctx, sink)
			if err != nil {
				return err
			}
			if !rep.Published {
				return errors.New("a member returned without finishing")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, pr := range rep.Partitions {
				if pr.Written > 0 {
					did[pr.Partition] = append(did[pr.Partition], i)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	members := map[int]bool{}
	for _, ms := range did {
		for _, m := range ms {
			members[m] = true
		}
	}
	if len(members) != 2 {
		t.Errorf("partitions written by members %v, want both members to have written: %v", members, did)
	}
	var want int64
	for _, r := range res.Ranges {
		want += r.End - r.Start
	}
	rows := db.rows(t)
	coords := map[string]bool{}
	for _, r := range rows {
		coords[strings.Fields(r)[0]] = true
	}
	if int64(len(rows)) != want || int64(len(coords)) != want {
		t.Errorf("table holds %d rows (%d distinct records), want %d", len(rows), len(coords), want)
	}
	c := connect(t, member(t).Plan)
	parts := make([]int32, 0, len(res.Ranges))
	for _, r := range res.Ranges {
		parts = append(parts, r.Partition)
	}
	cps, err := c.Checkpoints(t.Context(), "replay.joined", "orders", parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Ranges {
		if cp := cps[r.Partition]; cp.Offset != r.End || !cp.Done() {
			t.Errorf("partition %d committed %+v, want its end %d", r.Partition, cp, r.End)
		}
	}
}

// A process not joining (plain run) is refused while joined members run,
// and a joining process needs the ranges fixed.
func TestJoinRefusals(t *testing.T) {
	_, member, _ := joinPlan(t, 4000, 1000)
	job := member(t)
	opts := testOptions(t)
	opts.Join = true // no resolution, and no run recorded in the group
	var se *fault.SafetyError
	if _, err := Prepare(t.Context(), job.c, job.Plan, opts); !errors.As(err, &se) || se.Hint != fault.HintResolveOnce || !strings.Contains(err.Error(), "same fixed ranges") {
		t.Fatalf("--join on a fresh group without a resolution: want a refusal hinting at one resolution file, got %v", err)
	}
	sink := openSink(t, job)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := job.RunJoined(ctx, sink); done <- err }()
	testenv.Eventually(t, 15*time.Second, 100*time.Millisecond, func() bool {
		_, err := Prepare(t.Context(), job.c, job.Plan, testOptions(t))
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("a plain run next to a joined member: want *fault.SafetyError, got %v", err)
		}
		return err != nil
	}, "a plain run was never refused while a member was joined")
	// Another process of the same plan may join the live group (its
	// members are all 'replay run --join' processes of this plan).
	if _, err := Prepare(t.Context(), job.c, job.Plan, func() Options {
		o := testOptions(t)
		o.Join, o.Pinned = true, job.Resolution
		return o
	}()); err != nil {
		t.Fatalf("a second member of the same plan: %v", err)
	}
	// A process of another plan with the same group may not.
	other := *job.Plan
	other.Name = "other-plan"
	oo := testOptions(t)
	oo.Join = true
	if _, err := Prepare(t.Context(), job.c, &other, oo); !errors.As(err, &se) || se.Hint != fault.HintJoinedOnly || !strings.Contains(err.Error(), "not a joined process of this plan") {
		t.Fatalf("a member of another plan: want a refusal, got %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Errorf("cancelled member: want ErrInterrupted, got %v", err)
	}
}

// Two processes started with different resolutions of the same plan (a
// relative window resolved twice) must not mix their ranges: the member
// whose ranges differ from the group's checkpoints is refused, and the
// other finishes its own.
func TestJoinRefusesOtherRanges(t *testing.T) {
	res, member, db := joinPlan(t, 4000, 4000)
	a := member(t)
	other := *res
	other.Ranges = slices.Clone(res.Ranges)
	for i := range other.Ranges {
		other.Ranges[i].End-- // resolved a moment apart: other ends
	}
	opts := testOptions(t)
	opts.Join, opts.Pinned, opts.Heartbeat = true, &other, 200*time.Millisecond
	b, err := Prepare(t.Context(), a.c, a.Plan, opts) // before a pins its ranges
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { _, err := a.RunJoined(t.Context(), openSink(t, a)); aDone <- err }()
	testenv.Eventually(t, 15*time.Second, 50*time.Millisecond, func() bool { return group.CheckIdle(t.Context(), a.c.Cluster, a.Plan.Group) != nil },
		"the first member never joined")
	_, err = b.RunJoined(t.Context(), openSink(t, b))
	var se *fault.SafetyError
	if !errors.As(err, &se) || se.Hint != fault.HintSameResolution || !strings.Contains(err.Error(), "different resolutions") {
		t.Fatalf("a member with other ranges: want a refusal naming different resolutions, got %v", err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("the member with the group's ranges: %v", err)
	}
	var want int64
	for _, r := range res.Ranges {
		want += r.End - r.Start
	}
	if rows := db.rows(t); int64(len(rows)) != want {
		t.Errorf("table holds %d rows, want %d", len(rows), want)
	}
}

// Found by a break-it pass: a live consumer (kcat -G) joining the replay
// group during a joined run was given the partitions and committed over the
// plan's checkpoints, while the members failed with kafka-go's garbled
// "unable to read metadata for member ... %!w(<nil>)". A member now stops
// with a refusal that says what joined.
func TestJoinedMemberStopsWhenAConsumerJoins(t *testing.T) {
	requireKcat(t)
	_, member, _ := joinPlan(t, 6000, 300)
	job := member(t)
	done := make(chan error, 1)
	go func() { _, err := job.RunJoined(t.Context(), openSink(t, job)); done <- err }()
	testenv.Eventually(t, 15*time.Second, 50*time.Millisecond, func() bool { return group.CheckIdle(t.Context(), job.c.Cluster, job.Plan.Group) != nil },
		"the member never joined")
	// kcat's balanced consumer (librdkafka, classic group protocol).
	kc := exec.Command("kcat", "-G", job.Plan.Group, "-b", job.c.Brokers[0], "-q", "-o", "beginning", "orders")
	kc.Stdout = io.Discard
	if err := kc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { kc.Process.Kill(); kc.Wait() }()
	select {
	case err := <-done:
		var se *fault.SafetyError
		t.Logf("member: %v", err)
		if !errors.As(err, &se) || se.Hint != fault.HintJoinedOnly || !strings.Contains(err.Error(), "not a joined process") {
			t.Fatalf("want a refusal naming the foreign member, got %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the member went on next to a foreign consumer")
	}
}

// Found in review: a live consumer of the new group protocol (KIP-848,
// franz-go's server-side balancer) shows as Stable with no members to
// kafka-go, and --join accepted the group and took its partitions. A group
// that is not empty but lists no member is refused, joining or not.
func TestJoinRefusesKIP848Group(t *testing.T) {
	_, member, _ := joinPlan(t, 500, 1000)
	job := member(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(job.c.Brokers...), kgo.ConsumerGroup(job.Plan.Group), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	testenv.Eventually(t, 15*time.Second, 50*time.Millisecond, func() bool { return group.CheckIdle(t.Context(), job.c.Cluster, job.Plan.Group) != nil },
		"the consumer never joined")
	opts := testOptions(t)
	opts.Join, opts.Pinned = true, job.Resolution
	var se *fault.SafetyError
	if _, err := Prepare(t.Context(), job.c, job.Plan, opts); !errors.As(err, &se) {
		t.Fatalf("--join next to a live KIP-848 consumer: want a refusal, got %v", err)
	}
}
