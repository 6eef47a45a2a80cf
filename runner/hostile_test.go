package runner

// Integration tests against data and groups that break naive consumers:
// transactions (aborted data, markers at the end of a range, open
// transactions), compressed batches read from the middle, consumer groups
// that are not replay's, a topic growing during the run, and a partition
// subset. Everything runs on kfake over TCP; kafka-go is never mocked.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/fault"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/source"
	"github.com/replay-tool/replay/sinks/file"
)

// hostilePlan is filePlan with a chosen topic, extra source fields (each
// starting with ", ") and sink path.
func hostilePlan(t *testing.T, sb *sandbox.Sandbox, topic, source, window, out string) *plan.Plan {
	t.Helper()
	return testPlan(t, sb, fmt.Sprintf(`
version: 1
name: test-plan
source: {brokers: ["%%ADDR%%"], topic: %s%s}
group: replay.test
window:
%s
sink: {type: file, path: %s, batch_size: 100}
`, topic, source, window, out))
}

// readValues returns "partition/offset" -> value of every line of a file
// sink's output.
func readValues(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		r := gjson.ParseBytes(sc.Bytes())
		out[fmt.Sprintf("%d/%d", r.Get("partition").Int(), r.Get("offset").Int())] = r.Get("value").String()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// spanCoords returns "p/o" for o in [from, to).
func spanCoords(p int32, from, to int64) []string {
	var out []string
	for o := from; o < to; o++ {
		out = append(out, fmt.Sprintf("%d/%d", p, o))
	}
	return out
}

// wantCommits checks that the group committed exactly want (partition ->
// offset; -1 = no commit), each made by replay for the plan.
func wantCommits(t *testing.T, c *Cluster, p *plan.Plan, want map[int32]int64) {
	t.Helper()
	var parts []int32
	for part := range want {
		parts = append(parts, part)
	}
	slices.Sort(parts)
	cps := commits(t, c, p.Group, p.Source.Topic, parts...)
	for _, part := range parts {
		cp := cps[part]
		switch {
		case cp.Offset != want[part]:
			t.Errorf("partition %d: committed %d, want %d", part, cp.Offset, want[part])
		case want[part] >= 0 && (!cp.Replay || cp.Fingerprint != p.Fingerprint() || !cp.Done()):
			t.Errorf("partition %d: commit %+v is not a finished checkpoint of plan %s", part, cp, p.Fingerprint())
		}
	}
}

// ---------------------------------------------------------------------------
// Transactions: aborted data and markers under both isolation levels.

// txnLayout is what seedTxns writes. Partition 0:
//
//	0-1 plain, 2-4 aborted txn, 5 ABORT marker, 6-8 committed txn,
//	9 COMMIT marker, 10 plain (high watermark 11)
//
// Partition 1: 0 plain, 1-2 committed txn, 3 COMMIT marker: the log ends
// in a marker (high watermark 4).
const (
	p0Marker = 9  // commit marker on partition 0
	p0HWM    = 11 // high watermark of partition 0
	p1HWM    = 4  // high watermark of partition 1 (right after its marker)
)

var (
	p0Plain     = []string{"0/0", "0/1", "0/10"}
	p0Aborted   = []string{"0/2", "0/3", "0/4"}
	p0Committed = []string{"0/6", "0/7", "0/8"}
	p1Data      = []string{"1/0", "1/1", "1/2"}
)

type txnProducer struct {
	t     *testing.T
	plain *kgo.Client // idempotent, not transactional
	txn   *kgo.Client
	n     int // records produced, for timestamps
}

func newTxnProducer(t *testing.T, addr, topic string) *txnProducer {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	plain, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	txn, err := kgo.NewClient(append(opts, kgo.TransactionalID("seed-txn"), kgo.TransactionTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(txn.Close)
	return &txnProducer{t: t, plain: plain, txn: txn}
}

// produce writes values to part with cl and returns their offsets.
func (tp *txnProducer) produce(cl *kgo.Client, part int32, vals ...string) []int64 {
	tp.t.Helper()
	var recs []*kgo.Record
	for _, v := range vals {
		recs = append(recs, &kgo.Record{Partition: part, Value: []byte(v), Timestamp: t0.Add(time.Duration(tp.n) * time.Minute)})
		tp.n++
	}
	res := cl.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		tp.t.Fatalf("produce %v: %v", vals, err)
	}
	var offs []int64
	for _, r := range res {
		offs = append(offs, r.Record.Offset)
	}
	return offs
}

// transaction produces vals in one transaction and commits or aborts it;
// end false leaves it open.
func (tp *txnProducer) transaction(part int32, end bool, commit kgo.TransactionEndTry, vals ...string) []int64 {
	tp.t.Helper()
	ctx := context.Background()
	if err := tp.txn.BeginTransaction(); err != nil {
		tp.t.Fatal(err)
	}
	offs := tp.produce(tp.txn, part, vals...)
	if end {
		if err := testenv.EndTransaction(ctx, tp.txn, bool(commit), "orders"); err != nil {
			tp.t.Fatal(err)
		}
	}
	return offs
}

// seedTxns writes txnLayout to topic orders and checks the offsets.
func seedTxns(t *testing.T, sb *sandbox.Sandbox) *txnProducer {
	t.Helper()
	tp := newTxnProducer(t, sb.Addr, "orders")
	got := [][]int64{
		tp.produce(tp.plain, 0, "plain-0", "plain-1"),
		tp.transaction(0, true, kgo.TryAbort, "aborted-a", "aborted-b", "aborted-c"),
		tp.transaction(0, true, kgo.TryCommit, "committed-a", "committed-b", "committed-c"),
		tp.produce(tp.plain, 0, "plain-2"),
		tp.produce(tp.plain, 1, "plain-p1"),
		tp.transaction(1, true, kgo.TryCommit, "committed-p1a", "committed-p1b"),
	}
	want := [][]int64{{0, 1}, {2, 3, 4}, {6, 7, 8}, {10}, {0}, {1, 2}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("seeded layout: step %d got offsets %v, want %v (kfake changed how it places markers?)", i, got[i], want[i])
		}
	}
	return tp
}

// Under read_committed (the default) a window of a transactional topic
// delivers plain and committed records only, never aborted data or
// markers, finishes when the range ends on a commit marker (partition 0:
// to = marker + 1; partition 1: the log itself ends in a marker), counts
// the aborted records, and commits every partition at its end.
// Under read_uncommitted aborted data is delivered, markers still never.
func TestTransactionalWindow(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	seedTxns(t, sb)
	markerEnd := fmt.Sprintf("  offsets: {0: {from: earliest, to: %d}, 1: {from: earliest, to: latest}}", p0Marker+1)
	tests := []struct {
		name, source, window string
		want                 [][]string
		ends                 map[int32]int64
		aborted              map[int32]int64
	}{
		{"read_committed/ends-on-marker", "", markerEnd,
			[][]string{p0Plain[:2], p0Committed, p1Data}, map[int32]int64{0: p0Marker + 1, 1: p1HWM}, map[int32]int64{0: 3}},
		{"read_committed/latest", "", "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}",
			[][]string{p0Plain, p0Committed, p1Data}, map[int32]int64{0: p0HWM, 1: p1HWM}, map[int32]int64{0: 3}},
		{"read_committed/time-window", "", fmt.Sprintf("  from: %s", t0.Add(-time.Hour).Format(time.RFC3339)),
			[][]string{p0Plain, p0Committed, p1Data}, map[int32]int64{0: p0HWM, 1: p1HWM}, map[int32]int64{0: 3}},
		// From inside the aborted transaction (a fetch that starts after its
		// first offset must still drop the rest of it).
		{"read_committed/from-inside-aborted", "", "  offsets: {0: {from: 3, to: latest}}",
			[][]string{p0Plain[2:], p0Committed}, map[int32]int64{0: p0HWM}, map[int32]int64{0: 2}},
		{"read_uncommitted/ends-on-marker", ", isolation: read_uncommitted", markerEnd,
			[][]string{p0Plain[:2], p0Aborted, p0Committed, p1Data}, map[int32]int64{0: p0Marker + 1, 1: p1HWM}, nil},
		{"read_uncommitted/latest", ", isolation: read_uncommitted", "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}}",
			[][]string{p0Plain, p0Aborted, p0Committed, p1Data}, map[int32]int64{0: p0HWM, 1: p1HWM}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir() + "/out.jsonl"
			p := hostilePlan(t, sb, "orders", tc.source, tc.window, out)
			p.Group = "replay." + strings.NewReplacer("/", "-", "_", "-").Replace(tc.name)
			// A marker tail that never advances would hang: bound the run.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, rep, err := runPlan(t, ctx, p, nil)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			want := slices.Concat(tc.want...)
			vals := readValues(t, out)
			got := readCoords(t, out)
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("delivered %v: %s", sorted(got), diff(want, got))
			}
			for c, v := range vals {
				if p.Source.Isolation == plan.ReadCommitted && strings.HasPrefix(v, "aborted") {
					t.Errorf("%s: aborted record %q delivered under read_committed", c, v)
				}
			}
			for _, pr := range rep.Partitions {
				if pr.End != tc.ends[pr.Partition] || !pr.Done || pr.Next != pr.End {
					t.Errorf("partition %d: range end %d, next %d, done %v; want end %d, done", pr.Partition, pr.End, pr.Next, pr.Done, tc.ends[pr.Partition])
				}
				if pr.Aborted != tc.aborted[pr.Partition] {
					t.Errorf("partition %d: report counts %d aborted records, want %d", pr.Partition, pr.Aborted, tc.aborted[pr.Partition])
				}
			}
			wantCommits(t, connect(t, p), p, tc.ends)
		})
	}
}

// openTxnLayout seeds txnLayout, leaves a transaction open on partition 0
// at offsets 11-12, and then commits records of other producers after it: a
// second transactional producer (13-14, its marker 15) and a plain one
// (16). Under read_committed the last stable offset stays at 11 until the
// open transaction ends; the high watermark is 17.
func openTxnLayout(t *testing.T, sb *sandbox.Sandbox) *txnProducer {
	t.Helper()
	tp := seedTxns(t, sb)
	if got := tp.transaction(0, false, kgo.TryAbort, "open-a", "open-b"); !slices.Equal(got, []int64{11, 12}) {
		t.Fatalf("open transaction at %v, want [11 12]", got)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(sb.Addr), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("other-txn"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	got := tp.produce(other, 0, "after-a", "after-b")
	if err := testenv.EndTransaction(context.Background(), other, true, "orders"); err != nil {
		t.Fatal(err)
	}
	if got = append(got, tp.produce(tp.plain, 0, "after-plain")...); !slices.Equal(got, []int64{13, 14, 16}) {
		t.Fatalf("records after the open transaction at %v, want [13 14 16]", got)
	}
	return tp
}

// kcatCommitted is what kcat reads of partition 0 of orders under
// read_committed, as "partition/offset".
func kcatCommitted(t *testing.T, sb *sandbox.Sandbox) []string {
	t.Helper()
	out := testenv.Kcat(t, "-C", "-b", sb.Addr, "-t", "orders", "-p", "0", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%p/%o\n")
	return strings.Fields(string(out))
}

var openTxnWindows = []struct{ name, source, window string }{
	{"latest", "", "  offsets: {0: {from: earliest, to: latest}}"},
	{"time-window", ", partitions: [0]", fmt.Sprintf("  from: %s", t0.Add(-time.Hour).Format(time.RFC3339))},
}

// A transaction open at resolution, with committed records after it: under
// read_committed the range ends at the high watermark, the run delivers
// what is stable and waits; once the transaction commits, the run finishes
// with exactly what a read_committed consumer (kcat) reads. Under
// read_uncommitted the range ends at the high watermark and nothing waits.
func TestOpenTransactionWaits(t *testing.T) {
	const lso, hwm = 11, 17
	for _, w := range openTxnWindows {
		t.Run(w.name, func(t *testing.T) {
			sb := newTestCluster(t, 2, "orders")
			tp := openTxnLayout(t, sb)
			out := t.TempDir() + "/out.jsonl"
			p := hostilePlan(t, sb, "orders", w.source+", open_transaction_timeout: 1m", w.window, out)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			c := connect(t, p)
			job, err := Prepare(ctx, c, p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			r := job.Resolution.Ranges[0]
			if r.End != hwm || r.LastStable != lso || !r.OpenTransaction || len(r.Producers) != 1 || r.Producers[0].TransactionalID != "seed-txn" || r.Producers[0].TxnStartOffset != lso {
				t.Fatalf("resolved %+v, want end %d past the last stable offset %d, producer seed-txn named", r, hwm, lso)
			}
			fs, err := file.NewJSONL(out, job.RunID())
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			type result struct {
				rep *Report
				err error
			}
			done := make(chan result, 1)
			go func() { rep, err := job.Run(ctx, fs); done <- result{rep, err} }()
			// What is stable is delivered and committed while the run waits.
			testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
				return commits(t, c, p.Group, "orders", 0)[0].Offset == lso
			}, "the records before the open transaction committed (offset %d)", lso)
			select {
			case res := <-done:
				t.Fatalf("the run ended while the transaction is open: %v", res.err)
			case <-time.After(time.Second):
			}
			if err := testenv.EndTransaction(context.Background(), tp.txn, true, "orders"); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.err != nil {
				t.Fatalf("run: %v", res.err)
			}
			want := kcatCommitted(t, sb)
			if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) || len(want) != 11 {
				t.Fatalf("delivered %v, kcat reads %v: %s", sorted(got), want, diff(want, got))
			}
			if pr := res.rep.Partitions[0]; !pr.Done || pr.Next != hwm {
				t.Fatalf("report: next %d done %v, want %d", pr.Next, pr.Done, hwm)
			}
			wantCommits(t, c, p, map[int32]int64{0: hwm})
		})
	}
	t.Run("read_uncommitted", func(t *testing.T) {
		sb := newTestCluster(t, 2, "orders")
		openTxnLayout(t, sb)
		out := t.TempDir() + "/out.jsonl"
		p := hostilePlan(t, sb, "orders", ", isolation: read_uncommitted", "  offsets: {0: {from: earliest, to: latest}}", out)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		job, _, err := runPlan(t, ctx, p, nil)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if r := job.Resolution.Ranges[0]; r.End != hwm || r.OpenTransaction {
			t.Fatalf("resolved %+v, want end %d, nothing to wait for", r, hwm)
		}
		want := slices.Concat(p0Plain, p0Aborted, p0Committed, []string{"0/11", "0/12", "0/13", "0/14", "0/16"})
		if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
			t.Fatalf("delivered %v: %s", sorted(got), diff(want, got))
		}
	})
}

// A transaction that stays open past source.open_transaction_timeout fails
// the partition: what is before it is delivered and committed, the error
// names the partition, the last stable offset and the high watermark, and a
// run after the transaction committed resumes and finishes exactly.
func TestOpenTransactionTimeout(t *testing.T) {
	const lso, hwm = 11, 17
	for _, w := range openTxnWindows {
		t.Run(w.name, func(t *testing.T) {
			sb := newTestCluster(t, 2, "orders")
			tp := openTxnLayout(t, sb)
			out := t.TempDir() + "/out.jsonl"
			p := hostilePlan(t, sb, "orders", w.source+", open_transaction_timeout: 2s", w.window, out)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			start := time.Now()
			_, rep, err := runPlan(t, ctx, p, nil)
			var ote *source.OpenTransactionError
			if !errors.As(err, &ote) || ote.Partition != 0 || ote.LastStable != lso || ote.HighWatermark != hwm || len(ote.Producers) != 1 {
				t.Fatalf("run: %v, want an open transaction at %d (high watermark %d) with its producer", err, lso, hwm)
			}
			if fault.HintOf(err) != fault.HintOpenTransaction {
				t.Errorf("hint %q, want %q", fault.HintOf(err), fault.HintOpenTransaction)
			}
			for _, s := range []string{"orders/0 at offset 11", "last stable offset of orders/0 at 11", "high watermark 17", "transactional id seed-txn"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if el := time.Since(start); el < 2*time.Second {
				t.Errorf("failed after %s, before the timeout of 2s", el)
			}
			if pr := rep.Partitions[0]; pr.Done || pr.Next != lso {
				t.Errorf("report: next %d done %v, want %d and not done", pr.Next, pr.Done, lso)
			}
			if cp := commits(t, connect(t, p), p.Group, "orders", 0)[0]; cp.Offset != lso {
				t.Fatalf("committed %d, want %d", cp.Offset, lso)
			}
			// The transaction commits; the same plan resumes and finishes.
			if err := testenv.EndTransaction(context.Background(), tp.txn, true, "orders"); err != nil {
				t.Fatal(err)
			}
			job, rep, err := runPlan(t, ctx, p, nil)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if job.Fresh || job.Resume[0] != lso {
				t.Fatalf("resumed fresh=%v from %d, want from %d", job.Fresh, job.Resume[0], lso)
			}
			want := kcatCommitted(t, sb)
			if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) || len(want) != 11 {
				t.Fatalf("delivered %v, kcat reads %v: %s", sorted(got), want, diff(want, got))
			}
			if pr := rep.Partitions[0]; !pr.Done || pr.Next != hwm {
				t.Fatalf("report: next %d done %v, want %d", pr.Next, pr.Done, hwm)
			}
			wantCommits(t, connect(t, p), p, map[int32]int64{0: hwm})
		})
	}
}

// An offsets window ending past the last stable offset (inside the open
// transaction's span) resolves; one ending past the high watermark does
// not exist yet.
func TestOpenTransactionOffsetEnd(t *testing.T) {
	sb := newTestCluster(t, 2, "orders")
	openTxnLayout(t, sb)
	p := hostilePlan(t, sb, "orders", "", "  offsets: {0: {from: 0, to: 15}}", t.TempDir()+"/out.jsonl")
	job, err := Prepare(context.Background(), connect(t, p), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if r := job.Resolution.Ranges[0]; r.End != 15 || !r.OpenTransaction || !strings.Contains(r.Detail, "last stable offset at 11") {
		t.Fatalf("resolved %+v, want end 15 with the open transaction noted", r)
	}
	p = hostilePlan(t, sb, "orders", "", "  offsets: {0: {from: 0, to: 18}}", t.TempDir()+"/out.jsonl")
	if _, err := Prepare(context.Background(), connect(t, p), p, testOptions(t)); err == nil || !strings.Contains(err.Error(), "beyond the high watermark 17") {
		t.Fatalf("prepare: %v, want the end beyond the high watermark", err)
	}
}

// ---------------------------------------------------------------------------
// Compression: every codec kafka-go decodes.

// An offsets window starting inside a compressed batch (batches of 100,
// from: 150) delivers exactly from 150 on, nothing of the batch before it,
// with the right values, for every codec kafka-go writes.
func TestCompressedBatchesFromInside(t *testing.T) {
	codecs := []struct {
		name  string
		codec kafka.Compression
		attr  uint8 // kgo's CompressionType
	}{
		{"gzip", kafka.Gzip, 1}, {"snappy", kafka.Snappy, 2}, {"lz4", kafka.Lz4, 3}, {"zstd", kafka.Zstd, 4},
	}
	var topics []string
	for _, c := range codecs {
		topics = append(topics, "orders-"+c.name)
	}
	sb := newTestCluster(t, 1, topics...)
	const n = 1000
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "orders-" + c.name
			w := &kafka.Writer{Addr: kafka.TCP(sb.Addr), Topic: topic, Balancer: balancer(0), RequiredAcks: kafka.RequireAll,
				Compression: c.codec, BatchSize: 100}
			defer w.Close()
			for b := 0; b < n/100; b++ {
				var msgs []kafka.Message
				for i := b * 100; i < (b+1)*100; i++ {
					msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("rec-%d", i)), Time: t0.Add(time.Duration(i) * time.Second)})
				}
				if err := w.WriteMessages(context.Background(), msgs...); err != nil {
					t.Fatal(err)
				}
			}
			checkCompressed(t, sb.Addr, topic, c.attr)
			for i, win := range []struct {
				window   string
				from, to int64
			}{
				{"  offsets: {0: {from: 150, to: latest}}", 150, n},
				{"  offsets: {0: {from: 150, to: 250}}", 150, 250}, // ends inside a batch too
				{fmt.Sprintf("  from: %s\n  to: %s", t0.Add(150*time.Second).Format(time.RFC3339), t0.Add(250*time.Second).Format(time.RFC3339)), 150, 250},
			} {
				out := t.TempDir() + "/out.jsonl"
				p := hostilePlan(t, sb, topic, "", win.window, out)
				p.Group = fmt.Sprintf("replay.%s.%d", c.name, i)
				_, rep, err := runPlan(t, context.Background(), p, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := spanCoords(0, win.from, win.to)
				vals := readValues(t, out)
				if got := readCoords(t, out); !slices.Equal(got, want) {
					t.Fatalf("%s: delivered %d records: %s", win.window, len(got), diff(want, got))
				}
				for o := win.from; o < win.to; o++ {
					if v := vals[fmt.Sprintf("0/%d", o)]; v != fmt.Sprintf("rec-%d", o) {
						t.Fatalf("offset %d has value %q", o, v)
					}
				}
				if pr := rep.Partitions[0]; pr.Written != win.to-win.from {
					t.Errorf("report: %d written, want %d", pr.Written, win.to-win.from)
				}
				wantCommits(t, connect(t, p), p, map[int32]int64{0: win.to})
			}
		})
	}
}

// checkCompressed makes sure the topic really holds compressed batches
// (with kgo, an independent client), so the test cannot pass on plain data.
func checkCompressed(t *testing.T, addr, topic string, codec uint8) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(150)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) == 0 {
		t.Fatal("kgo read nothing")
	}
	if got := recs[0].Attrs.CompressionType(); got != codec {
		t.Fatalf("topic %s: batch compression %d, want %d", topic, got, codec)
	}
}

// ---------------------------------------------------------------------------
// Group safety: replay never shares a group with a live consumer.

// groupReader joins group as a live kafka-go consumer-group member of
// orders and fetches one message (without committing), so the group is
// Stable with one member.
func groupReader(t *testing.T, sb *sandbox.Sandbox, group string) *kafka.Reader {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{sb.Addr}, GroupID: group, Topic: "orders",
		HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 3 * time.Second,
		MaxWait: 250 * time.Millisecond, StartOffset: kafka.FirstOffset})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.FetchMessage(ctx); err != nil {
		r.Close()
		t.Fatalf("consumer-group member: %v", err)
	}
	if _, err := sb.WaitGroupStable(ctx, group, 1); err != nil {
		r.Close()
		t.Fatalf("group %s never became stable: %v", group, err)
	}
	return r
}

func waitGroupEmpty(t *testing.T, c *Cluster, g string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, 50*time.Millisecond, func() bool { return group.CheckIdle(context.Background(), c.Cluster, g) == nil },
		"group %s still has members", g)
}

// A group with a live consumer-group member is refused by Prepare; and a
// member that joins after Prepare is fenced by the broker at the first
// commit, before anything is read.
func TestRefusesLiveGroup(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 300, t0, time.Hour)
	p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}, 2: {from: earliest, to: latest}}")
	c := connect(t, p)

	r := groupReader(t, sb, p.Group)
	_, err := Prepare(context.Background(), c, p, testOptions(t))
	var se *fault.SafetyError
	if !errors.As(err, &se) || se.Group != p.Group || !strings.Contains(err.Error(), "Stable") {
		r.Close()
		t.Fatalf("prepare with a live member: want *fault.SafetyError naming the Stable state, got %v", err)
	}
	if _, err := Prepare(context.Background(), c, p, Options{Restart: true}); !errors.As(err, &se) {
		r.Close()
		t.Fatalf("restart must not override a live group: %v", err)
	}
	r.Close()
	waitGroupEmpty(t, c, p.Group)

	job, err := Prepare(context.Background(), c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r = groupReader(t, sb, p.Group) // joins between plan and run
	defer r.Close()
	fs, err := file.NewJSONL(out, job.RunID())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	var wrote bool
	_, err = job.Run(context.Background(), &hookSink{Sink: fs, fn: func(int64, []record.Record) error { wrote = true; return nil }})
	if !errors.As(err, &se) || se.Group != p.Group {
		t.Fatalf("run into a group that became live: want *fault.SafetyError, got %v", err)
	}
	if wrote {
		t.Fatal("records were written before the group was found live")
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a refused run must not publish output")
	}
	for part, cp := range commits(t, c, p.Group, "orders", 0, 1, 2) {
		if cp.Offset != -1 {
			t.Errorf("partition %d: replay committed %d into a live group", part, cp.Offset)
		}
	}
}

// A member that joins between Prepare and Run of a resumed job is fenced
// before anything is written too. Regression: only a fresh run pinned its
// ranges with a standalone commit before reading; a resumed run wrote
// batches to the sink and learnt the group was live at its first commit.
func TestRefusesLiveGroupOnResume(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 3000, t0, time.Hour)
	p, out := filePlan(t, sb, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)))
	c := connect(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	_, err = job.Run(ctx, &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
		if n == 2 {
			cancel()
		}
		return nil
	}})
	fs.Close()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	before := commits(t, c, p.Group, "orders", 0, 1, 2)
	job, err = Prepare(context.Background(), c, p, testOptions(t))
	if err != nil || job.Fresh || job.NothingToDo() {
		t.Fatalf("want a resumed job with work left, got %+v, err %v", job, err)
	}
	r := groupReader(t, sb, p.Group)
	defer r.Close()
	fs, _ = file.NewJSONL(out, job.RunID())
	defer fs.Close()
	var writes int
	_, err = job.Run(context.Background(), &hookSink{Sink: fs, fn: func(int64, []record.Record) error { writes++; return nil }})
	var se *fault.SafetyError
	if !errors.As(err, &se) {
		t.Fatalf("resume into a group that became live: want *fault.SafetyError, got %v", err)
	}
	if writes != 0 {
		t.Fatalf("%d batches were written before the group was found live", writes)
	}
	if after := commits(t, c, p.Group, "orders", 0, 1, 2); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("commits changed: %v -> %v", before, after)
	}
}

// Regression: an interruption finished every batch already fetched (up to
// a whole fetch response, thousands of records) instead of only the
// in-flight one, so a signal could take as long as a slow sink needs for
// all of them, and a short run could not be interrupted at all.
func TestInterruptFinishesOnlyInFlightBatch(t *testing.T) {
	sb := newTestCluster(t, 1, "orders")
	seed(t, sb, "orders", 2000, t0, time.Hour) // one record batch: one fetch returns it all
	p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}}")
	c := connect(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job, err := Prepare(ctx, c, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	defer fs.Close()
	sink := &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
		if n == 1 {
			cancel()
		}
		return nil
	}}
	if _, err := job.Run(ctx, sink); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	if n := sink.writes.Load(); n != 1 {
		t.Fatalf("%d batches written after the interruption, want only the in-flight one", n-1)
	}
	if cp := commits(t, c, p.Group, "orders", 0)[0]; cp.Offset != 100 {
		t.Fatalf("committed %d, want 100 (one batch)", cp.Offset)
	}
}

// kgoMember joins group as a live franz-go member of orders (the classic
// protocol, or KIP-848 with serverSide) and polls one record, without
// committing.
func kgoMember(t *testing.T, sb *sandbox.Sandbox, group string, serverSide bool) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(sb.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}
	if serverSide {
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(cl.PollRecords(ctx, 1).Records()) == 0 {
		if ctx.Err() != nil {
			cl.Close()
			t.Fatalf("franz-go member of %s read nothing", group)
		}
	}
	return cl
}

// Live franz-go members (classic protocol, KIP-848) are refused too, both
// by Prepare and, when they join after Prepare, by the broker's answer to
// the first commit. Regression: the broker answers a standalone commit into
// a KIP-848 group with UNSUPPORTED_VERSION, which was a plain error (exit 1)
// instead of a *fault.SafetyError (exit 3).
func TestRefusesLiveFranzGoGroup(t *testing.T) {
	for _, tc := range []struct {
		name       string
		serverSide bool
	}{{"classic", false}, {"kip-848", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestCluster(t, 3, "orders")
			seed(t, sb, "orders", 300, t0, time.Hour)
			p, out := filePlan(t, sb, "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}, 2: {from: earliest, to: latest}}")
			c := connect(t, p)
			m := kgoMember(t, sb, p.Group, tc.serverSide)
			_, err := Prepare(context.Background(), c, p, testOptions(t))
			var se *fault.SafetyError
			if !errors.As(err, &se) {
				m.Close()
				t.Fatalf("prepare with a live franz-go member: want *fault.SafetyError, got %v", err)
			}
			m.Close()
			waitGroupEmpty(t, c, p.Group)
			job, err := Prepare(context.Background(), c, p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			m = kgoMember(t, sb, p.Group, tc.serverSide)
			defer m.Close()
			fs, _ := file.NewJSONL(out, job.RunID())
			defer fs.Close()
			if _, err := job.Run(context.Background(), fs); !errors.As(err, &se) {
				t.Fatalf("run into a group that became live: want *fault.SafetyError, got %v", err)
			}
		})
	}
}

// A group holding commits that replay did not make (a real consumer's, or
// made by hand, without replay's metadata) is refused, with or without
// Restart, and its commits are left alone.
func TestRefusesForeignCommits(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 300, t0, time.Hour)
	p, _ := filePlan(t, sb, timeWindow(t0, t0.Add(30*time.Minute)))
	c := connect(t, p)
	resp, err := (&kafka.Client{Addr: kafka.TCP(sb.Addr)}).OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{GroupID: p.Group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"orders": {{Partition: 1, Offset: 42}}}})
	if err != nil || resp.Topics["orders"][0].Error != nil {
		t.Fatalf("foreign commit: %v %v", err, resp)
	}
	for _, restart := range []bool{false, true} {
		opts := testOptions(t)
		opts.Restart = restart
		_, err := Prepare(context.Background(), c, p, opts)
		var se *fault.SafetyError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "orders/1") || !strings.Contains(err.Error(), "did not make") {
			t.Fatalf("restart=%v: want *fault.SafetyError naming orders/1, got %v", restart, err)
		}
	}
	cp := commits(t, c, p.Group, "orders", 1)[1]
	if cp.Offset != 42 || cp.Replay {
		t.Fatalf("the foreign commit was touched: %+v", cp)
	}
}

// A group holding checkpoints of another plan (the window changed) is
// refused with both fingerprints named; with Restart the new window runs
// and the output equals it; the finished new plan then re-runs as nothing
// to do.
func TestRefusesOtherPlanCheckpoints(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 3000, t0, time.Hour)
	out := t.TempDir() + "/out.jsonl"
	fromA, toA := t0.Add(5*time.Minute), t0.Add(20*time.Minute)
	fromB, toB := t0.Add(10*time.Minute), t0.Add(40*time.Minute)
	a := hostilePlan(t, sb, "orders", "", timeWindow(fromA, toA), out)
	if _, _, err := runPlan(t, context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	b := hostilePlan(t, sb, "orders", "", timeWindow(fromB, toB), out)
	c := connect(t, b)
	_, err := Prepare(context.Background(), c, b, testOptions(t))
	var se *fault.SafetyError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), a.Fingerprint()) || !strings.Contains(err.Error(), b.Fingerprint()) {
		t.Fatalf("want *fault.SafetyError naming fingerprints %s and %s, got %v", a.Fingerprint(), b.Fingerprint(), err)
	}
	opts := testOptions(t)
	opts.Restart = true
	job, err := Prepare(context.Background(), c, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !job.Fresh {
		t.Fatal("a restart must resolve afresh")
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	rep, err := job.Run(context.Background(), fs)
	fs.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.KcatCoords(t, sb.Addr, "orders", -1, fromB, toB)
	if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) || len(got) != len(want) {
		t.Fatalf("after restart: %s", diff(want, got))
	}
	ends := map[int32]int64{}
	for _, pr := range rep.Partitions {
		ends[pr.Partition] = pr.End
	}
	wantCommits(t, c, b, ends)
	if again, err := Prepare(context.Background(), c, b, testOptions(t)); err != nil || !again.NothingToDo() {
		t.Fatalf("re-run of the finished restarted plan: err %v", err)
	}
}

// Regression: a restart with a plan that selects fewer partitions left the
// old plan's checkpoints on the partitions it no longer reads, so every
// later run of the new plan (even a re-run of the finished plan) was
// refused for "another plan's checkpoints".
func TestRestartWithFewerPartitions(t *testing.T) {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 600, t0, time.Hour)
	out := t.TempDir() + "/out.jsonl"
	from, to := t0.Add(5*time.Minute), t0.Add(50*time.Minute)
	a := hostilePlan(t, sb, "orders", "", timeWindow(from, to), out)
	if _, _, err := runPlan(t, context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	b := hostilePlan(t, sb, "orders", ", partitions: [0, 2]", timeWindow(from, to), out)
	c := connect(t, b)
	opts := testOptions(t)
	opts.Restart = true
	job, err := Prepare(context.Background(), c, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := file.NewJSONL(out, job.RunID())
	rep, err := job.Run(context.Background(), fs)
	fs.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range testenv.KcatCoords(t, sb.Addr, "orders", -1, from, to) {
		if !strings.HasPrefix(s, "1/") {
			want = append(want, s)
		}
	}
	if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("after restart: %s", diff(want, got))
	}
	wantCommits(t, c, b, map[int32]int64{0: rep.Partitions[0].End, 1: -1, 2: rep.Partitions[1].End})
	again, err := Prepare(context.Background(), c, b, testOptions(t))
	if err != nil || !again.NothingToDo() {
		t.Fatalf("re-run of the finished restarted plan: err %v", err)
	}
	if !slices.Equal(again.Ignored, []int32{1}) {
		t.Fatalf("re-run ignores %v, want [1]", again.Ignored)
	}
}

// ---------------------------------------------------------------------------
// The window end is a snapshot (the replay does not chase
// the topic).

// Records produced while the run is in progress (on the first sink write)
// are not delivered: every partition stops at the end resolved before the
// run, for a time window without to and for to: latest.
func TestWindowEndIsSnapshot(t *testing.T) {
	for _, tc := range []struct{ name, window string }{
		{"time-window-open-end", fmt.Sprintf("  from: %s", t0.Add(-time.Hour).Format(time.RFC3339))},
		{"offsets-latest", "  offsets: {0: {from: earliest, to: latest}, 1: {from: earliest, to: latest}, 2: {from: earliest, to: latest}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newTestCluster(t, 3, "orders")
			// Small batches: the range takes many fetches, and the last ones
			// return batches written during the run right after the end.
			if err := produceSmallBatches(sb.Addr, 3, 0, 1000); err != nil {
				t.Fatal(err)
			}
			p, out := filePlan(t, sb, tc.window)
			c := connect(t, p)
			job, err := Prepare(context.Background(), c, p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range job.Resolution.Ranges {
				if r.Start != 0 || r.End != r.HighWatermark || r.End == 0 {
					t.Fatalf("resolved %+v, want [0, high watermark)", r)
				}
				want = append(want, spanCoords(r.Partition, 0, r.End)...)
			}
			fs, _ := file.NewJSONL(out, job.RunID())
			defer fs.Close()
			sink := &hookSink{Sink: fs, fn: func(n int64, _ []record.Record) error {
				if n != 1 {
					return nil
				}
				// Timestamps inside the window: only the snapshot keeps them out.
				return produceSmallBatches(sb.Addr, 3, 1000, 300)
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := job.Run(ctx, sink)
			if err != nil {
				t.Fatal(err)
			}
			if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("delivered %d records, want %d: %s", len(got), len(want), diff(want, got))
			}
			now, err := c.ListOffsets(context.Background(), "orders", []int32{0, 1, 2}, plan.ReadCommitted)
			if err != nil {
				t.Fatal(err)
			}
			ends := map[int32]int64{}
			grown := false
			for _, pr := range rep.Partitions {
				ends[pr.Partition] = pr.End
				grown = grown || now[pr.Partition].HighWatermark > pr.End
			}
			if !grown {
				t.Fatal("no record was produced during the run: the test tests nothing")
			}
			wantCommits(t, c, p, ends)
		})
	}
}

// produceSmallBatches writes n records of about 1 KB to each of parts
// partitions of orders in batches of 10, timestamps t0+i s from i = first:
// a partition takes several fetches.
func produceSmallBatches(addr string, parts int32, first, n int) error {
	pad := strings.Repeat("x", 1000)
	for p := range parts {
		w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "orders", Balancer: balancer(p), RequiredAcks: kafka.RequireAll, BatchSize: 10}
		for b := first; b < first+n; b += 10 {
			var msgs []kafka.Message
			for i := b; i < min(b+10, first+n); i++ {
				msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprintf("rec-%d-%s", i, pad)), Time: t0.Add(time.Duration(i) * time.Second)})
			}
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				w.Close()
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Partition selection.

// partitions: [0, 2] reads only those partitions; the others are listed
// as unselected / ignored and get no commit, on the first run and on the
// re-run of the finished plan.
func TestSelectedPartitions(t *testing.T) {
	sb := newTestCluster(t, 4, "orders")
	seed(t, sb, "orders", 4000, t0, time.Hour)
	from, to := t0.Add(10*time.Minute), t0.Add(40*time.Minute)
	out := t.TempDir() + "/out.jsonl"
	p := hostilePlan(t, sb, "orders", ", partitions: [0, 2]", timeWindow(from, to), out)
	job, rep, err := runPlan(t, context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(job.Ignored, []int32{1, 3}) || !slices.Equal(job.Resolution.Unselected, []int32{1, 3}) || !slices.Equal(rep.Ignored, []int32{1, 3}) {
		t.Fatalf("ignored %v, unselected %v, report %v: want [1 3]", job.Ignored, job.Resolution.Unselected, rep.Ignored)
	}
	var parts []int32
	for _, r := range job.Resolution.Ranges {
		parts = append(parts, r.Partition)
	}
	if !slices.Equal(parts, []int32{0, 2}) || len(rep.Partitions) != 2 {
		t.Fatalf("ranges for %v, report for %d partitions: want [0 2]", parts, len(rep.Partitions))
	}
	var want []string
	for _, s := range testenv.KcatCoords(t, sb.Addr, "orders", -1, from, to) {
		if strings.HasPrefix(s, "0/") || strings.HasPrefix(s, "2/") {
			want = append(want, s)
		}
	}
	if len(want) == 0 {
		t.Fatal("nothing in the window: the test data is wrong")
	}
	if got := readCoords(t, out); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("delivered: %s", diff(want, got))
	}
	c := connect(t, p)
	wantCommits(t, c, p, map[int32]int64{0: rep.Partitions[0].End, 1: -1, 2: rep.Partitions[1].End, 3: -1})
	again, err := Prepare(context.Background(), c, p, testOptions(t))
	if err != nil || !again.NothingToDo() || !slices.Equal(again.Ignored, []int32{1, 3}) {
		t.Fatalf("re-run: err %v, ignored %v", err, again.Ignored)
	}
}
