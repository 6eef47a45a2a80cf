package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/worker"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
)

// produceValues writes values to one partition of "orders", in order, one
// second apart from t0; the key of value i is "k-<i>".
func produceValues(t *testing.T, sb *sandbox.Sandbox, partition int, values ...string) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(sb.Addr), Topic: "orders", RequiredAcks: kafka.RequireAll, Balancer: balancer(partition)}
	defer w.Close()
	msgs := make([]kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k-%d", i)), Value: []byte(v), Time: t0.Add(time.Duration(i) * time.Second)}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// order is an order event with an id and a status.
func order(id int, status string) string {
	return fmt.Sprintf(`{"id":%d,"status":%q}`, id, status)
}

// errorPlan is a plan over all of "orders" into a file sink with the given
// extra YAML (filter, on_error, ...).
func errorPlan(t *testing.T, sb *sandbox.Sandbox, parts, batch int, extra string) (*plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	extra = strings.ReplaceAll(extra, "%DIR%", dir)
	var offsets []string
	for i := range parts {
		offsets = append(offsets, fmt.Sprintf("%d: {from: earliest, to: latest}", i))
	}
	return testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.test
window:
  offsets: {%s}
sink: {type: file, path: %s, batch_size: %d}
%s
`, strings.Join(offsets, ", "), out, batch, extra)), out
}

// prepared prepares p with fast retries and returns the job and a file sink.
func prepared(t *testing.T, p *plan.Plan) (*Job, *file.Sink) {
	t.Helper()
	opts := testOptions(t)
	opts.Retry = worker.Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}
	job, err := Prepare(context.Background(), connect(t, p), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return job, fs
}

// requireCommitsAtEnds checks that every partition is committed at its end.
func requireCommitsAtEnds(t *testing.T, p *plan.Plan, rep *Report) {
	t.Helper()
	c := connect(t, p)
	for _, pr := range rep.Partitions {
		if cp := commits(t, c, p.Group, "orders", pr.Partition)[pr.Partition]; cp.Offset != pr.End {
			t.Errorf("partition %d committed %d, want its end %d", pr.Partition, cp.Offset, pr.End)
		}
	}
}

func sumReports(rep *Report, field func(PartitionReport) map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, pr := range rep.Partitions {
		for k, v := range field(pr) {
			out[k] += v
		}
	}
	return out
}

// A filter writes the records it passes, counts the others as filtered and
// commits past them, also when the last records of a partition are
// filtered out.
func TestFilterCountsAndCommitsPastFiltered(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	produceValues(t, sb, 0, order(1, "paid"), order(2, "created"), order(3, "paid"), order(4, "shipped"), order(5, "refunded"))
	produceValues(t, sb, 1, order(6, "created"), order(7, "paid"), `{"id":8}`, "null")
	p, out := errorPlan(t, sb, 2, 2, `filter: value.status == "paid"`)
	job, fs := prepared(t, p)
	rep, err := job.Run(context.Background(), fs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readCoords(t, out), []string{"0/0", "0/2", "1/1"}; !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want the paid orders %v", got, want)
	}
	if got := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Skipped }); got["filtered"] != 6 || len(got) != 1 {
		t.Errorf("skipped %v, want filtered=6", got)
	}
	if _, written, _ := rep.Totals(); written != 3 {
		t.Errorf("written %d, want 3", written)
	}
	requireCommitsAtEnds(t, p, rep)
}

// poisonData has a value that is not JSON at 0@2; the filter cannot read
// its status.
func poisonData(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	produceValues(t, sb, 0, order(1, "paid"), order(2, "paid"), "not json", order(4, "paid"), order(5, "paid"))
	produceValues(t, sb, 1, order(6, "paid"), order(7, "paid"))
}

// on_error: fail stops the partition at the poison record, named with its
// coordinates and reason, after writing and committing what precedes it.
func TestPoisonRecordFails(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	poisonData(t, sb)
	p, out := errorPlan(t, sb, 2, 100, `filter: value.status == "paid"`)
	job, fs := prepared(t, p)
	_, err := job.Run(context.Background(), fs)
	var pe *PartitionError
	if !errors.As(err, &pe) || pe.Partition != 0 || pe.Offset != 2 {
		t.Fatalf("want a PartitionError for partition 0 at offset 2, got %v", err)
	}
	for _, want := range []string{"orders/0@2", "filter: the value is not JSON", "filter-error", "on_error: fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	fs.Close()
	if cp := commits(t, connect(t, p), p.Group, "orders", 0)[0]; cp.Offset != 2 {
		t.Errorf("partition 0 committed %d, want 2 (the poison record)", cp.Offset)
	}
	if got := readCoords(t, out+".parts/partition-0.jsonl"); !slices.Equal(got, []string{"0/0", "0/1"}) {
		t.Errorf("partition 0 staged %v, want the records before the poison", got)
	}
}

// on_error: skip counts the poison record and writes the others.
func TestPoisonRecordSkipped(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	poisonData(t, sb)
	p, out := errorPlan(t, sb, 2, 2, "filter: value.status == \"paid\"\non_error: skip")
	job, fs := prepared(t, p)
	rep, err := job.Run(context.Background(), fs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readCoords(t, out), []string{"0/0", "0/1", "0/3", "0/4", "1/0", "1/1"}; !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	skipped := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Skipped })
	errs := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Errors })
	if skipped["filter-error"] != 1 || errs["filter-error"] != 1 {
		t.Errorf("skipped %v, errors %v: want filter-error=1 in both", skipped, errs)
	}
	requireCommitsAtEnds(t, p, rep)
}

// rejectingSink writes every record's key like a database sink (the
// runner's key stage renders it; a failing template is the record's
// *record.Error before Write) and rejects records whose value has "reject",
// as a database rejects a row; it writes nothing then. keys holds the key
// of each record written, by "partition/offset".
type rejectingSink struct {
	sinks.Sink
	mu   sync.Mutex
	keys map[string]string
}

// Capabilities: every record's key, nothing else, whatever the wrapped
// sink declares (the runner then commits after every batch).
func (*rejectingSink) Capabilities() sinks.Capabilities {
	return sinks.Capabilities{Keys: sinks.KeysAll}
}

func (s *rejectingSink) Write(ctx context.Context, batch []record.Record) error {
	for i := range batch {
		r := &batch[i]
		if strings.Contains(string(r.Value), "reject") {
			return &record.Error{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: errors.New("row rejected: value too long")}
		}
	}
	if err := s.Sink.Write(ctx, batch); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		s.keys[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r.IdemKey
	}
	return nil
}

// on_error: dead_letter writes exactly the records that cannot be processed
// (filter, key template, sink) to the dead-letter file with their reasons,
// the others to the sink, and commits every partition at its end.
func TestPoisonRecordsDeadLettered(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	produceValues(t, sb, 0, order(1, "paid"), "not json", order(3, "paid"), `{"id":4,"status":"paid","reject":true}`, order(5, "created"), order(6, "paid"))
	produceValues(t, sb, 1, `{"status":"paid"}`, order(8, "paid"), `{"id":9,"status":"paid","reject":1}`)
	p, out := errorPlan(t, sb, 2, 3, "filter: value.status == \"paid\"\non_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl}")
	p.Sink.Key = "{{ .Value.id }}"
	job, fs := prepared(t, p)
	rs := &rejectingSink{Sink: fs, keys: map[string]string{}}
	rep, err := job.Run(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readCoords(t, out), []string{"0/0", "0/2", "0/5", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("sink holds %v, want %v", got, want)
	}
	if want := map[string]string{"0/0": "1", "0/2": "3", "0/5": "6", "1/1": "8"}; !maps.Equal(rs.keys, want) {
		t.Errorf("the sink got the keys %v, want %v", rs.keys, want)
	}
	dead := filepath.Join(filepath.Dir(out), "dead.jsonl")
	want := map[string]string{"0/1": "filter: the value is not JSON", "0/3": "row rejected", "1/0": "key template", "1/2": "row rejected"}
	b, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("dead letters:\n%s\nwant %d", b, len(want))
	}
	for _, l := range lines {
		r := gjson.Parse(l)
		coord := fmt.Sprintf("%d/%d", r.Get("partition").Int(), r.Get("offset").Int())
		reason, ok := want[coord]
		if !ok || !strings.Contains(r.Get("error").String(), reason) {
			t.Errorf("dead letter %s: %s, want reason %q", coord, l, reason)
		}
		if r.Get("source_topic").String() != "orders" || fmt.Sprintf("%d/%d", r.Get("source_partition").Int(), r.Get("source_offset").Int()) != coord {
			t.Errorf("dead letter %s: wrong source coordinates: %s", coord, l)
		}
		if !r.Get("key").Exists() || !r.Get("value").Exists() || !r.Get("timestamp").Exists() {
			t.Errorf("dead letter %s lacks the original record: %s", coord, l)
		}
	}
	errs := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Errors })
	skipped := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Skipped })
	if errs["filter-error"] != 1 || errs["key-error"] != 1 || errs["sink-rejected"] != 2 || skipped["dead-lettered"] != 4 || skipped["filtered"] != 1 {
		t.Errorf("errors %v, skipped %v", errs, skipped)
	}
	requireCommitsAtEnds(t, p, rep)
}

// Dead letters the dead-letter sink could not write are not counted as
// dead-lettered: a value that is not UTF-8 cannot be a text dead letter,
// the run fails, and its report counts what reached the sinks.
func TestDeadLettersCountedOnceWritten(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	produceValues(t, sb, 0, order(1, "paid"), "\xff\xfe", order(3, "paid"))
	p, _ := errorPlan(t, sb, 1, 3, "filter: value.status == \"paid\"\non_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl, value_format: text, retry: {max_elapsed: 0s}}")
	job, fs := prepared(t, p)
	rep, err := job.Run(context.Background(), fs)
	if err == nil || !strings.Contains(err.Error(), "write dead letters") {
		t.Fatalf("run: %v, want the dead-letter write's failure", err)
	}
	if rep == nil {
		t.Fatal("no report of the failed run")
	}
	if skipped := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Skipped }); skipped["dead-lettered"] != 0 {
		t.Errorf("skipped %v: counts a dead letter that was never written", skipped)
	}
}

// More records that cannot be processed than max_errors: the run stops
// naming the count, and the batch holding the one too many is not committed.
func TestMaxErrorsExceeded(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	var values []string
	for i := range 30 {
		v := order(i, "paid")
		if i%5 == 2 {
			v = "garbage"
		}
		values = append(values, v)
	}
	produceValues(t, sb, 0, values...)
	p, _ := errorPlan(t, sb, 1, 5, "filter: value.status == \"paid\"\non_error: skip\nmax_errors: 3")
	job, fs := prepared(t, p)
	_, err := job.Run(context.Background(), fs)
	var le *worker.ErrorLimitError
	if !errors.As(err, &le) || le.Count != 4 || le.Allowed != 3 {
		t.Fatalf("want an worker.ErrorLimitError at 4 of 3, got %v", err)
	}
	if !strings.Contains(err.Error(), "4 records could not be processed, more than max_errors 3") {
		t.Errorf("message: %v", err)
	}
	// Batches [0,5), [5,10), [10,15) are done; [15,20) holds the fourth.
	if cp := commits(t, connect(t, p), p.Group, "orders", 0)[0]; cp.Offset != 15 {
		t.Errorf("committed %d, want 15", cp.Offset)
	}
}

// flakySink fails writes as fail says, after writing the batch when
// written is set (the write was durable, its acknowledgement was lost).
type flakySink struct {
	sinks.Sink
	mu      sync.Mutex
	calls   int
	written bool
	fail    func(call int) error
}

// Capabilities: none, whatever the wrapped sink declares (the runner then
// commits after every batch).
func (*flakySink) Capabilities() sinks.Capabilities { return sinks.Capabilities{} }

func (s *flakySink) Write(ctx context.Context, batch []record.Record) error {
	s.mu.Lock()
	s.calls++
	err := s.fail(s.calls)
	s.mu.Unlock()
	if err != nil && !s.written {
		return err
	}
	if werr := s.Sink.Write(ctx, batch); werr != nil {
		return werr
	}
	return err
}

// Transient sink errors are retried with backoff: the output is complete,
// without duplicates, and nothing is skipped or dead-lettered.
func TestTransientSinkErrorRetried(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seed(t, sb, "orders", 600, t0, time.Hour)
	p, out := errorPlan(t, sb, 2, 50, "on_error: skip")
	job, fs := prepared(t, p)
	sink := &flakySink{Sink: fs, written: true, fail: func(call int) error {
		if call%3 == 1 && call < 12 { // 4 failures, then fine
			return fmt.Errorf("postgres sink: upsert: %w", &sinks.TransientError{Err: syscall.ECONNRESET})
		}
		return nil
	}}
	rep, err := job.Run(context.Background(), sink)
	if err != nil {
		t.Fatal(err)
	}
	got := readCoords(t, out)
	if len(got) != 600 || hasDup(got) {
		t.Fatalf("wrote %d records (duplicates: %v), want 600 once each", len(got), hasDup(got))
	}
	if _, written, skipped := rep.Totals(); written != 600 || skipped != 0 {
		t.Errorf("written %d, skipped %d", written, skipped)
	}
	requireCommitsAtEnds(t, p, rep)
}

// A permanent sink error fails the partition at once (no retries); a
// transient one that does not pass fails it after the attempts. Either
// way the commit never passes what the sink holds.
func TestSinkErrorFailsPartition(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls int
		want      string
	}{
		{"permanent", errors.New("disk on fire"), 3, "disk on fire"},
		{"transient that does not pass", &sinks.TransientError{Err: errors.New("503 Service Unavailable")}, 0, "spends the retry budget of 300ms (sink.retry.max_elapsed); last error: 503 Service Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestCluster(t, 1, "orders")
			seed(t, sb, "orders", 500, t0, time.Hour)
			p, out := errorPlan(t, sb, 1, 50, "on_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl}")
			// 300 ms: room for several retries (backoff from 1 ms) on a loaded
			// machine, where one sleep may take tens of milliseconds.
			p.Sink.Retry.MaxElapsed = plan.Duration(300 * time.Millisecond)
			job, fs := prepared(t, p)
			sink := &flakySink{Sink: fs, fail: func(call int) error {
				if call > 2 {
					return tc.err
				}
				return nil
			}}
			_, err := job.Run(context.Background(), sink)
			var pe *PartitionError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "re-run the same command to resume") {
				t.Fatalf("want a PartitionError with %q and a resume hint, got %v", tc.want, err)
			}
			if tc.wantCalls == 0 && sink.calls < 2+5 { // backoff from 1 ms, capped, within 300 ms
				t.Errorf("%d writes, want the failing batch tried until its budget was spent", sink.calls)
			} else if tc.wantCalls > 0 && sink.calls != tc.wantCalls {
				t.Errorf("%d writes, want %d", sink.calls, tc.wantCalls)
			}
			fs.Close()
			cp := commits(t, connect(t, p), p.Group, "orders", 0)[0]
			if staged := readCoords(t, out+".parts/partition-0.jsonl"); cp.Offset != 100 || len(staged) != 100 {
				t.Errorf("committed %d, sink holds %d: want 100 and 100", cp.Offset, len(staged))
			}
			// The dead-letter staging file exists (Sync creates it before each
			// commit, for a resume to find), empty.
			if dead := readCoords(t, filepath.Join(filepath.Dir(out), "dead.jsonl.parts", "partition-0.jsonl")); len(dead) != 0 {
				t.Errorf("a sink failure must never be dead-lettered: %v", dead)
			}
		})
	}
}

// selfRetrying is a flakySink that says it retries by itself (as the http
// sink does with max_retries).
type selfRetrying struct{ *flakySink }

func (selfRetrying) Capabilities() sinks.Capabilities {
	return sinks.Capabilities{RetriesItself: true}
}

// Found by a break-it pass: the runner retried a sink that had already
// retried by its plan's max_retries (an http sink with max_retries: 4 got
// 25 POSTs), and the first signal waited for every retry of a failing
// sink. Now a self-retrying sink gets one try per write, and a signal
// starts no new try: the partition stops without committing the batch.
func TestSinkRetriesBoundedAndStoppedBySignal(t *testing.T) {
	transient := &sinks.TransientError{Err: errors.New("503 Service Unavailable")}
	t.Run("self-retrying sink", func(t *testing.T) {
		sb := newTestCluster(t, 1, "orders")
		seed(t, sb, "orders", 500, t0, time.Hour)
		p, _ := errorPlan(t, sb, 1, 50, "")
		job, fs := prepared(t, p)
		sink := selfRetrying{&flakySink{Sink: fs, fail: func(call int) error {
			if call > 2 {
				return transient
			}
			return nil
		}}}
		_, err := job.Run(context.Background(), sink)
		var pe *PartitionError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), "gave up after") {
			t.Fatalf("want the sink's own error, not retried, got %v", err)
		}
		if sink.calls != 3 {
			t.Errorf("%d writes, want 3: two that pass, one try of the failing batch", sink.calls)
		}
	})
	t.Run("signal while the sink fails", func(t *testing.T) {
		sb := newTestCluster(t, 1, "orders")
		seed(t, sb, "orders", 500, t0, time.Hour)
		p, _ := errorPlan(t, sb, 1, 50, "")
		opts := testOptions(t)
		opts.Retry = worker.Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond}
		job, err := Prepare(context.Background(), connect(t, p), p, opts)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := file.NewJSONL(plan.ConfigOf[file.Section](&p.Sink).Path, job.RunID())
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var failing atomic.Int32
		sink := &flakySink{Sink: fs, fail: func(call int) error {
			if call > 2 {
				if failing.Add(1) == 3 {
					cancel() // the signal, during the third try of the failing batch
				}
				return transient
			}
			return nil
		}}
		_, err = job.Run(ctx, sink)
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("want ErrInterrupted, got %v", err)
		}
		if n := failing.Load(); n != 3 {
			t.Errorf("the failing batch was tried %d times, want 3: none after the signal", n)
		}
		// The message says what happened: not "written and committed".
		if msg := err.Error(); !strings.Contains(msg, "the sink was failing, so the batch in flight was not written (or not confirmed) and is not committed on orders/0 at offset 100") ||
			strings.HasPrefix(msg, "interrupted: the in-flight batches were written and committed") {
			t.Errorf("the interruption's message does not say the batch in flight was abandoned: %v", err)
		}
		if cp := commits(t, connect(t, p), p.Group, "orders", 0)[0]; cp.Offset != 100 {
			t.Errorf("committed %d, want 100: the failing batch is not committed", cp.Offset)
		}
	})
}

// The http sink's max_retries bounds the requests of a failing batch: the
// runner does not retry it again (it made 5 × (max_retries+1) requests).
func TestHTTPSinkMaxRetriesBoundsRequests(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 100, t0, time.Hour)
	p := testPlan(t, sb, `
version: 1
name: http-retries
source: {brokers: ["%ADDR%"], topic: orders}
group: replay.http-retries
window: {offsets: {0: {from: earliest, to: latest}}}
throttle: {records_per_second: 100000}
sink: {type: http, url: "`+srv.URL+`", batch_size: 100, max_retries: 2, max_retry_wait: 10ms}
`)
	job, err := Prepare(context.Background(), connect(t, p), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = job.Run(context.Background(), openSink(t, job))
	var pe *PartitionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("want a PartitionError with the 503, got %v", err)
	}
	if n := posts.Load(); n != 3 {
		t.Errorf("%d POSTs, want 3 (one try and max_retries: 2)", n)
	}
}

// countingSyncer counts the Syncs of a dead-letter sink.
type countingSyncer struct {
	sinks.Sink
	syncs atomic.Int64
}

func (c *countingSyncer) Sync(ctx context.Context, partition int32) error {
	c.syncs.Add(1)
	return c.Sink.Capabilities().Syncer.Sync(ctx, partition)
}

func (c *countingSyncer) Capabilities() sinks.Capabilities {
	caps := c.Sink.Capabilities()
	caps.Syncer = c
	return caps
}

// Found in review: with a sink that commits after every batch (a
// database), each commit fsynced the dead-letter file, also when no dead
// letter had been written since. It is synced once per partition for its
// trace, then only after dead letters.
func TestDeadLetterSyncOnlyWhenWritten(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	var vals []string
	for i := range 500 {
		v := order(i, "paid")
		if i == 250 {
			v = "not json" // one dead letter, in the middle
		}
		vals = append(vals, v)
	}
	produceValues(t, sb, 0, vals...)
	p, _ := errorPlan(t, sb, 1, 50, "filter: value.status == \"paid\"\non_error: dead_letter\ndead_letter: {type: file, path: %DIR%/dead.jsonl}")
	job, fs := prepared(t, p)
	dl, err := registry.NewDeadLetter(context.Background(), *p.DeadLetter, sinks.Options{RunID: job.RunID()})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	counted := &countingSyncer{Sink: dl}
	job.DeadLetters = counted
	main := &hookSink{Sink: fs, fn: func(int64, []record.Record) error { return nil }} // no Syncer: a commit per batch
	if _, err := job.Run(context.Background(), main); err != nil {
		t.Fatal(err)
	}
	if n := counted.syncs.Load(); n > 3 {
		t.Errorf("the dead-letter sink was synced %d times for 10 batches and one dead letter, want at most 3", n)
	}
	if n := counted.syncs.Load(); n < 2 {
		t.Errorf("the dead-letter sink was synced %d times: want its trace and the dead letter made durable", n)
	}
}
