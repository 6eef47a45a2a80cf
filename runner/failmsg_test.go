package runner

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// failingSink is durable on Write (its commits run behind the next
// Write) and fails its failOn-th Write with a plain error, closing failed
// (when set) then.
type failingSink struct {
	failOn int32
	writes atomic.Int32
	failed chan struct{}
}

func (s *failingSink) Write(_ context.Context, recs []record.Record) error {
	if s.writes.Add(1) == s.failOn {
		if s.failed != nil {
			close(s.failed)
		}
		return errors.New("disk on fire")
	}
	return nil
}
func (s *failingSink) Finish(context.Context) error     { return nil }
func (s *failingSink) Close() error                     { return nil }
func (s *failingSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// A sink failure says how far the partition is committed: the commit of
// the batches before it, in flight when the sink failed, is answered
// first, so the offset in the message is the group's committed offset
// once the run has stopped, not one from before that commit landed.
func TestSinkFailureNamesTheCommittedOffset(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 500, t0, time.Hour)
	// Every OffsetCommit but the partition's start is answered once the
	// third Write failed: the commit of the first batch is in flight while
	// the second and third batches are written.
	sink := &failingSink{failOn: 3, failed: make(chan struct{})}
	var commits atomic.Int32
	sb.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		if commits.Add(1) > 1 {
			sb.SleepControl(func() { <-sink.failed })
		}
		return nil, nil, false
	})
	p := testPlan(t, sb, `
version: 1
name: failmsg
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.failmsg
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: file, path: unused.jsonl, batch_size: 100}
`)
	_, _, err := runPlan(t, context.Background(), p, sink)
	if err == nil {
		t.Fatal("the run succeeded; want the sink's failure")
	}
	m := regexp.MustCompile(`nothing past offset (\d+) is committed`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q does not say how far the partition is committed", err)
	}
	said, _ := strconv.ParseInt(m[1], 10, 64)
	cl, cerr := kgo.NewClient(kgo.SeedBrokers(sb.Addr))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer cl.Close()
	offs, ferr := kadm.NewClient(cl).FetchOffsets(context.Background(), "replay.failmsg")
	if ferr != nil {
		t.Fatal(ferr)
	}
	o, ok := offs.Lookup("orders", 0)
	if !ok || o.Err != nil {
		t.Fatalf("no committed offset of orders/0 (%v)", o.Err)
	}
	t.Logf("error: %v; committed: %d", err, o.At)
	if said != o.At || said < 100 {
		t.Errorf("the error says nothing past offset %d is committed; the group holds %d (at least the first batch, 100, was written and committed)", said, o.At)
	}
}

// A sink failure whose commit of the batches before it fails too makes
// that commit once: the partition's stop does not send it again (a
// broker that keeps refusing commits would take the retry budget twice).
func TestSinkFailureCommitsOnce(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 500, t0, time.Hour)
	sink := &failingSink{failOn: 3, failed: make(chan struct{})}
	var commits atomic.Int32
	sb.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		if commits.Add(1) == 1 {
			return nil, nil, false // the first commit lands (the partition's start)
		}
		sb.SleepControl(func() { <-sink.failed })                                // in flight until the third Write failed
		return refusedCommit(req, kerr.GroupAuthorizationFailed.Code), nil, true // not retriable
	})
	p := testPlan(t, sb, `
version: 1
name: failonce
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.failonce
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: file, path: unused.jsonl, batch_size: 100}
`)
	// The commit of the first batch goes out behind the second Write and
	// is refused; the third Write fails, and the worker collects the
	// refusal then. Nothing may send that commit again.
	_, _, err := runPlan(t, context.Background(), p, sink)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "Group Authorization Failed") {
		t.Fatalf("error %v, want the sink's failure and the refused commit", err)
	}
	t.Logf("error: %v; %d OffsetCommit requests", err, commits.Load())
	if n := commits.Load(); n != 2 {
		t.Errorf("%d OffsetCommit requests, want 2 (the one that landed, the refused one once)", n)
	}
}

// slowFinishSink takes an hour to publish, as the parquet sink building
// its objects takes a while: its clock (the run's Options.Now) jumps an
// hour in Finish, which notes when it is done.
type slowFinishSink struct {
	mu        sync.Mutex
	ahead     time.Duration
	published time.Time
	err       error // what Finish returns
}

func (s *slowFinishSink) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.ahead)
}

func (s *slowFinishSink) Write(context.Context, []record.Record) error { return nil }
func (s *slowFinishSink) Finish(context.Context) error {
	s.mu.Lock()
	s.ahead = time.Hour
	s.mu.Unlock()
	s.published = s.now()
	return s.err
}
func (s *slowFinishSink) Close() error                     { return nil }
func (s *slowFinishSink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

// The run's time (the report's finished, which the summary's duration and
// rate come from) takes in the publication of the output, whether it
// published or failed.
func TestReportFinishedAfterPublication(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 100, t0, time.Hour)
	for i, fails := range []error{nil, errors.New("the disk is full")} {
		p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: slowpublish%d
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.slowpublish%d
window: {offsets: {all: {from: earliest, to: latest}}}
sink: {type: file, path: unused.jsonl, batch_size: 100}
`, i, i))
		sink := &slowFinishSink{err: fails}
		opts := testOptions(t)
		opts.Now = sink.now // an hour passes in Finish
		job, err := Prepare(context.Background(), connect(t, p), p, opts)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := job.Run(context.Background(), sink)
		if rep == nil || (err != nil) != (fails != nil) || rep.Published != (fails == nil) {
			t.Fatalf("run = %v, report %v: want a report, published unless Finish failed (%v)", err, rep, fails)
		}
		if rep.Finished.Before(sink.published) {
			t.Errorf("Finish failing %v: report finished at %s, before the publication ended at %s", fails, rep.Finished, sink.published)
		}
	}
}
