package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/testenv"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
)

const eosPartitions = 4

// eosWindowEnd is the window end of eosSetup's plans (now, rounded down to
// the second, when the package's tests start): every record before it.
var eosWindowEnd = time.Now().UTC().Truncate(time.Second)

// eosSetup seeds a cluster with n records on 4 partitions, creates the
// target topic orders-eos there (as many partitions) and writes a plan
// replaying every record into it exactly once, throttled to rps records
// a second (0: unthrottled).
func eosSetup(t *testing.T, n, rps int) (sb *testenv.Kafka, dir, planFile string) {
	t.Helper()
	sb, seed := newCluster(t, eosPartitions, 0)
	seed.N = n
	// First, records with a null key, an empty key and a binary key on
	// every partition (the target must keep each key as it is): the
	// seeded records run past the window end.
	var odd []*kgo.Record
	for p := range int32(eosPartitions) {
		for i, key := range [][]byte{nil, {}, {0, 0xff, 'k'}} {
			odd = append(odd, &kgo.Record{Partition: p, Key: key, Value: []byte(fmt.Sprintf("odd-%d-%d", p, i)),
				Timestamp: seed.From.Add(-time.Minute)})
		}
	}
	sb.Produce(t, "orders", odd...)
	sb.Seed(t, seed)
	seed.To = eosWindowEnd
	sb.CreateTopic(t, "orders-eos", eosPartitions, nil)
	dir = t.TempDir()
	planFile = writePlan(t, dir, planSpec{name: "eos", addr: sb.Addr, from: seed.From.Add(-time.Hour), to: seed.To,
		recordsPerSecond: rps, sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: orders-eos, keep_partition: true, exactly_once: true, batch_size: 200}", sb.Addr)})
	return sb, dir, planFile
}

// readCommitted returns the data records of topic as a read_committed
// consumer sees them (it reads the transaction markers too, to reach the
// end of each partition).
func readCommitted(t *testing.T, sb *testenv.Kafka, topic string, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, r := range sb.ReadTopic(t, topic, kgo.FetchIsolationLevel(level), kgo.KeepControlRecords()) {
		if !r.Attrs.IsControl() {
			out = append(out, r)
		}
	}
	return out
}

// checkExactlyOnce checks that a read_committed read of orders-eos holds
// every source record once, in source order per partition (keep_partition),
// with the source's key (a null key null, an empty key empty), value,
// timestamp and headers byte for byte, followed by the provenance headers
// and the idempotency key's; and that kcat, reading read_committed, counts
// the same records.
func checkExactlyOnce(t *testing.T, sb *testenv.Kafka) {
	t.Helper()
	checkExactlyOnceAcross(t, sb, sb)
}

// checkExactlyOnceAcross is checkExactlyOnce with the source topic on src
// and the target topic on dst.
func checkExactlyOnceAcross(t *testing.T, src, dst *testenv.Kafka) {
	t.Helper()
	var source []*kgo.Record
	for _, r := range src.ReadTopic(t, "orders") {
		if r.Timestamp.Before(eosWindowEnd) {
			source = append(source, r)
		}
	}
	target := readCommitted(t, dst, "orders-eos", kgo.ReadCommitted())
	if len(target) != len(source) {
		t.Errorf("read_committed: %d records in the target, want the %d of the source, each once", len(target), len(source))
	}
	bySource := map[string]*kgo.Record{}
	for _, r := range source {
		bySource[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
	}
	seen := map[string]bool{}
	last := map[int32]int64{}
	for _, r := range target {
		hs := r.Headers
		const nprov = 6 // the provenance headers and replay-key
		if len(hs) < nprov || hs[len(hs)-1].Key != kafkasink.HeaderKey {
			t.Fatalf("target %d@%d: headers %v, want the provenance headers and %s last", r.Partition, r.Offset, hs, kafkasink.HeaderKey)
		}
		prov := map[string]string{}
		for _, h := range hs[len(hs)-nprov:] {
			prov[h.Key] = string(h.Value)
		}
		coord := prov[kafkasink.HeaderSourcePartition] + "/" + prov[kafkasink.HeaderSourceOffset]
		src, ok := bySource[coord]
		switch {
		case !ok:
			t.Fatalf("target %d@%d: source record %s is not in the source", r.Partition, r.Offset, coord)
		case seen[coord]:
			t.Fatalf("target %d@%d: source record %s delivered twice", r.Partition, r.Offset, coord)
		case src.Partition != r.Partition || src.Offset <= last[r.Partition]-1 && last[r.Partition] > 0:
			t.Fatalf("target %d@%d: source record %s out of order", r.Partition, r.Offset, coord)
		case (src.Key == nil) != (r.Key == nil) || !bytes.Equal(src.Key, r.Key):
			t.Fatalf("target %d@%d: key %q (null %v), want the source record %s's %q (null %v)", r.Partition, r.Offset, r.Key, r.Key == nil, coord, src.Key, src.Key == nil)
		case !bytes.Equal(src.Value, r.Value) || !sameHeaders(src.Headers, hs[:len(hs)-nprov]) || !src.Timestamp.Equal(r.Timestamp):
			t.Fatalf("target %d@%d differs from source record %s", r.Partition, r.Offset, coord)
		case prov[kafkasink.HeaderKey] != coord2key(coord):
			t.Fatalf("target %d@%d: %s %q, want the default idempotency key of %s", r.Partition, r.Offset, kafkasink.HeaderKey, prov[kafkasink.HeaderKey], coord)
		}
		seen[coord] = true
		last[r.Partition] = src.Offset + 1
	}
	kc := strings.Fields(string(testenv.Kcat(t, "-C", "-b", dst.Addr, "-t", "orders-eos", "-X", "isolation.level=read_committed", "-e", "-q", "-f", `%p/%o\n`)))
	if len(kc) != len(source) {
		t.Errorf("kcat read_committed: %d records in the target, want %d", len(kc), len(source))
	}
}

// coord2key is the default idempotency key of the orders record at
// coord ("<partition>/<offset>").
func coord2key(coord string) string { return "orders/" + coord }

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// checkGroupAtEnds checks that the replay group committed every partition
// to its range end.
func checkGroupAtEnds(t *testing.T, planFile string) {
	t.Helper()
	for p, cp := range checkpoints(t, planFile, eosPartitions) {
		if !cp.Replay || cp.Offset != cp.End {
			t.Errorf("partition %d: committed %d, range [%d, %d); want the end", p, cp.Offset, cp.Start, cp.End)
		}
	}
}

// TestExactlyOnceOtherCluster: with the target on another cluster, the
// transactions keep the group's offsets there (the target has an empty
// topic named like the source), the runner commits to the source cluster;
// runs killed at random moments and resumed deliver each record once, and
// both clusters' groups end at the range ends.
func TestExactlyOnceOtherCluster(t *testing.T) {
	t.Parallel()
	testenv.RequireKfake(t, "it needs a second cluster")
	src, seed := newCluster(t, eosPartitions, 8000)
	dst := testenv.NewKafka(t, testenv.Partitions(eosPartitions), testenv.Topics("orders", "orders-eos"))
	dir := t.TempDir()
	seed.To = eosWindowEnd
	planFile := writePlan(t, dir, planSpec{name: "eos-x", addr: src.Addr, from: seed.From.Add(-time.Hour), to: seed.To,
		recordsPerSecond: 8000, sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: orders-eos, keep_partition: true, exactly_once: true, batch_size: 200}", dst.Addr)})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	killed := 0
	for range 3 {
		p := startProcess(t, dir, "run", "--yes", planFile)
		select {
		case <-p.done:
		case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			killed++
		}
		if code := p.cmd.ProcessState.ExitCode(); code != -1 && code != exitOK {
			t.Fatalf("run exited %d: %s", code, p.stderr)
		}
	}
	// (A read_committed read now could wait: a killed run may have left a
	// transaction open until the next run fences its producer.)
	t.Logf("%d of 3 runs killed", killed)
	if killed == 0 {
		t.Fatal("no run was killed: the test exercised no crash (the throttle no longer keeps a run longer than the kill timer)")
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("the last run: %s", r)
	}
	// Each record once, by provenance and bytes, not only by count: a
	// duplicate and a loss would cancel out in a count.
	checkExactlyOnceAcross(t, src, dst)
	checkGroupAtEnds(t, planFile)
	ends := checkpoints(t, planFile, eosPartitions)
	// Every partition must be there: an empty result (no offsets ever
	// committed on the target) would otherwise pass.
	got := dst.Committed(t, "replay.eos-x", "orders")
	for p, e := range ends {
		if o, ok := got[p]; !ok || o.At != e.End {
			t.Errorf("target cluster: group at %+v on partition %d, want the range end %d", o, p, e.End)
		}
	}
}

// eosKills is the number of kills of TestExactlyOnceSurvivesSIGKILL and
// the records it replays: 10 over 20000 by default, REPLAY_SOAK_KILLS and
// REPLAY_SOAK_RECORDS for a longer soak.
func eosKills(t *testing.T) (kills, records int) {
	kills, records = 10, 20000
	if v := os.Getenv("REPLAY_SOAK_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("REPLAY_SOAK_KILLS=%q: %v", v, err)
		}
		kills, records = n, 200000
	}
	if v := os.Getenv("REPLAY_SOAK_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("REPLAY_SOAK_RECORDS=%q: %v", v, err)
		}
		records = n
	}
	return kills, records
}

// TestExactlyOnceSurvivesSIGKILL: a run into a Kafka topic with
// exactly_once, killed with SIGKILL at random moments (mid-transaction,
// between the transaction and the runner's commit, in the throttle) and
// resumed each time, leaves each source record exactly once in what a
// read_committed consumer reads, and the group at the range ends.
func TestExactlyOnceSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	kills, records := eosKills(t)
	// Each process lives 50-300 ms; at 20000 records a second a run of
	// 20000 records would take a second: the kills land all over it.
	sb, dir, planFile := eosSetup(t, records, 4*records/max(kills, 1))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	seed := rng.Uint64()
	rng = rand.New(rand.NewPCG(seed, 2))
	t.Logf("kill moments seed %d", seed)
	killed := 0
	for range kills {
		p := startProcess(t, dir, "run", "--yes", planFile)
		select {
		case <-p.done:
		case <-time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			killed++
		}
		if code := p.cmd.ProcessState.ExitCode(); code != -1 && code != exitOK {
			t.Fatalf("run exited %d before the kill: %s", code, p.stderr)
		}
	}
	t.Logf("%d of %d runs killed", killed, kills)
	if killed == 0 {
		t.Fatal("no run was killed: the test exercised no crash (the throttle no longer keeps a run longer than the kill timer)")
	}
	if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("the last run: %s", r)
	}
	checkExactlyOnce(t, sb)
	checkGroupAtEnds(t, planFile)
}

// TestExactlyOnceFencedProcess: two processes of the same plan: the second
// fences the first, which stops with exit 3 naming the transactional id;
// the target holds each record once.
func TestExactlyOnceFencedProcess(t *testing.T) {
	t.Parallel()
	sb, dir, planFile := eosSetup(t, 4000, 2000)
	p := startProcess(t, dir, "run", "--yes", planFile)
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, func() bool {
		return len(readCommitted(t, sb, "orders-eos", kgo.ReadCommitted())) > 0
	}, "the first run commits a transaction")
	// The second process fences the first when it starts its producers
	// (the group has no members: replay commits standalone), and runs the
	// plan to its end.
	second := replayProcess(t, dir, "run", "--yes", planFile)
	<-p.done
	r := result{code: p.cmd.ProcessState.ExitCode(), stderr: p.stderr.String()}
	if r.code != exitRefused || !strings.Contains(r.stderr, "transactional id replay-eos-") || !strings.Contains(r.stderr, "was fenced by another producer") {
		t.Fatalf("the fenced run: want exit 3 naming the transactional id, got %s", r)
	}
	t.Logf("fenced run:\n%s", r.stderr)
	if strings.Contains(r.stderr, "re-run the same command to resume") || !strings.Contains(r.stderr, "let it finish") {
		t.Errorf("the fenced run must not advise re-running while the other process runs: %s", r.stderr)
	}
	if second.code != exitOK {
		t.Fatalf("the second run: %s", second)
	}
	checkExactlyOnce(t, sb)
	checkGroupAtEnds(t, planFile)
}

// TestExactlyOnceAbortedRecordsHidden: a process killed while a
// transaction is open (the broker holds its EndTxn until the kill) leaves
// records a read_uncommitted consumer sees, with an abort marker once the
// next run fenced the producer; a read_committed consumer sees each source
// record once.
func TestExactlyOnceAbortedRecordsHidden(t *testing.T) {
	t.Parallel()
	testenv.RequireKfake(t, "ControlKey and SleepControl hold an EndTxn")
	sb, dir, planFile := eosSetup(t, 4000, 0)
	held, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	sb.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !once.CompareAndSwap(false, true) {
			return nil, nil, false // another partition's: processed as usual
		}
		close(held)
		sb.SleepControl(func() { <-release })
		return nil, errors.New("the process was killed"), true // never processed
	})
	cmd, _, stderr := command(t, dir, "run", "--yes", planFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("no transaction ended: %s", stderr)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	close(release)
	if r := replayProcess(t, dir, "run", "--yes", planFile); r.code != exitOK {
		t.Fatalf("the resumed run: %s", r)
	}
	committed := readCommitted(t, sb, "orders-eos", kgo.ReadCommitted())
	uncommitted := readCommitted(t, sb, "orders-eos", kgo.ReadUncommitted())
	aborts := 0
	for _, r := range sb.ReadTopic(t, "orders-eos", kgo.KeepControlRecords()) {
		// A control record's key: version (int16), type (int16: 0 abort).
		if r.Attrs.IsControl() && len(r.Key) == 4 && r.Key[2] == 0 && r.Key[3] == 0 {
			aborts++
		}
	}
	t.Logf("read_committed %d records, read_uncommitted %d, %d abort markers", len(committed), len(uncommitted), aborts)
	if len(uncommitted) <= len(committed) || aborts == 0 {
		t.Errorf("read_uncommitted sees %d records and %d abort markers, read_committed %d: want the aborted transaction's records seen by read_uncommitted only", len(uncommitted), aborts, len(committed))
	}
	checkExactlyOnce(t, sb)
	checkGroupAtEnds(t, planFile)
}
