package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner"
)

// A PostgreSQL sink whose table another session holds locked (a migration,
// a failover's long lock) while a run writes: with lock_timeout set on the
// sink's connections its writes fail with lock_not_available (55P03), a
// transient error, until the lock goes.

const outagePartitions = 2

// outage is a run against a table that a second session can lock.
type outage struct {
	t         *testing.T
	dir, plan string
	table     string
	conn      *pgx.Conn // the test's own session: counts rows, holds the lock
	lock      pgx.Tx
}

// newOutage seeds n records over outagePartitions partitions and writes a
// plan into a postgres table at rate records/s; dsnParams are added to the
// sink's DSN, sinkExtra to its flow mapping.
func newOutage(t *testing.T, n, rate int, dsnParams map[string]string, sinkExtra string) *outage {
	t.Helper()
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range dsnParams {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	sb, seed := newCluster(t, outagePartitions, n)
	o := &outage{t: t, dir: t.TempDir(), table: "replay_outage", conn: conn}
	o.plan = writePlan(t, o.dir, planSpec{name: "outage", addr: sb.Addr, from: seed.From, to: seed.To, recordsPerSecond: rate,
		sink: fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 100%s}", u.String(), o.table, sinkExtra)})
	return o
}

// start starts `replay run --yes` and waits until the table holds at
// least rows rows.
func (o *outage) start(rows int) *process {
	t := o.t
	t.Helper()
	p := startProcess(t, o.dir, "run", "--yes", o.plan)
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended before the outage: %s", p.result())
		}
		return o.count() >= rows
	}, "the run wrote nothing")
	return p
}

// count is the number of rows in the table (0 before it exists).
func (o *outage) count() int {
	var n int
	if err := o.conn.QueryRow(o.t.Context(), "SELECT count(*) FROM "+o.table).Scan(&n); err != nil {
		return 0
	}
	return n
}

// lockTable holds an ACCESS EXCLUSIVE lock on the table until unlock.
func (o *outage) lockTable() {
	o.t.Helper()
	tx, err := o.conn.Begin(o.t.Context())
	if err != nil {
		o.t.Fatal(err)
	}
	if _, err := tx.Exec(o.t.Context(), "LOCK TABLE "+o.table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		o.t.Fatal(err)
	}
	o.lock = tx
}

// waitLockWaiters waits until n sessions wait for a lock on the table.
func (o *outage) waitLockWaiters(n int) {
	o.t.Helper()
	testenv.Eventually(o.t, 30*time.Second, 10*time.Millisecond, func() bool {
		var waiting int
		err := o.conn.QueryRow(o.t.Context(), `SELECT count(*) FROM pg_locks WHERE relation = $1::regclass AND NOT granted`, o.table).Scan(&waiting)
		return err == nil && waiting >= n
	}, "%d writes waiting for the table's lock", n)
}

func (o *outage) unlock() {
	o.t.Helper()
	if err := o.lock.Commit(o.t.Context()); err != nil {
		o.t.Fatal(err)
	}
}

// checkCommitsMatchTable checks that each partition's committed offset is
// exactly past the rows the table holds of it: nothing committed that is
// not in the table, and nothing in the table (of a contiguous prefix)
// beyond the commit.
func (o *outage) checkCommitsMatchTable() { o.checkCommitsWithin(0) }

// checkCommitsWithin is checkCommitsMatchTable where the table may hold up
// to unconfirmed rows past a partition's commit: a write whose answer the
// frozen server never sent may have committed (a resume writes it again,
// idempotently); never fewer rows than the commit.
func (o *outage) checkCommitsWithin(unconfirmed int64) {
	t := o.t
	t.Helper()
	cps := checkpoints(t, o.plan, outagePartitions)
	for p := int32(0); p < outagePartitions; p++ {
		var n, next int64
		if err := o.conn.QueryRow(t.Context(), `SELECT count(*), coalesce(max("offset") + 1, 0) FROM `+o.table+` WHERE "partition" = $1`, p).Scan(&n, &next); err != nil {
			t.Fatal(err)
		}
		cp := cps[p]
		if extra := next - cp.Offset; extra < 0 || extra > unconfirmed || n != next-cp.Start {
			t.Errorf("partition %d: committed %d (range from %d), the table holds %d rows up to offset %d", p, cp.Offset, cp.Start, n, next-1)
		}
	}
}

// checkExact checks that the table holds every record of the window once.
func (o *outage) checkExact(want int) {
	o.t.Helper()
	var n, distinct int
	if err := o.conn.QueryRow(o.t.Context(), `SELECT count(*), count(DISTINCT ("partition", "offset")) FROM `+o.table).Scan(&n, &distinct); err != nil {
		o.t.Fatal(err)
	}
	if n != want || distinct != want {
		o.t.Errorf("the table holds %d rows (%d distinct records), want %d", n, distinct, want)
	}
	o.checkCommitsMatchTable()
}

// An outage of the sink (its table locked, writes failing with
// lock_not_available) that lasts several failed attempts is ridden out
// within sink.retry.max_elapsed: the run finishes exactly, with no resume.
func TestSinkOutageRiddenOut(t *testing.T) {
	t.Parallel()
	o := newOutage(t, 6000, 1000, map[string]string{"lock_timeout": "200"}, "")
	p := o.start(500)
	o.lockTable()
	testenv.Eventually(t, 60*time.Second, 20*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended during the outage: %s", p.result())
		}
		return strings.Count(p.stderr.String(), "SQLSTATE 55P03") >= 3
	}, "three writes failing on the lock")
	o.unlock()
	r := p.result()
	if r.code != exitOK {
		t.Fatalf("the run did not ride out a 5 s outage: %s", r)
	}
	if !strings.Contains(r.text(), "transient error, retrying") || !strings.Contains(r.stderr, "55P03") {
		t.Errorf("the run logged no retry of lock_not_available (55P03): the outage did not happen?\n%s", r)
	}
	o.checkExact(6000)
}

// With a budget shorter than the outage the run fails: exit 1, naming the
// partition, the offset it committed, the last error and the resume
// command; the commits match the table exactly, and the resume finishes.
func TestSinkOutageBudgetSpent(t *testing.T) {
	t.Parallel()
	o := newOutage(t, 6000, 1000, map[string]string{"lock_timeout": "100"}, ", retry: {max_elapsed: 1s}")
	p := o.start(500)
	o.lockTable()
	start := time.Now()
	r := p.result()
	took := time.Since(start)
	o.unlock()
	t.Logf("failed after %s:\n%s", took.Round(time.Millisecond), r.text())
	if r.code != exitFailed {
		t.Fatalf("want exit %d once the budget is spent, got %s", exitFailed, r)
	}
	text := r.text()
	for _, want := range []string{"partition orders/", " at offset ", "spends the retry budget of 1s (sink.retry.max_elapsed)", "55P03",
		"resume with: replay run " + o.plan + " --yes", "sink.retry.max_elapsed to ride out longer outages"} {
		if !strings.Contains(text, want) {
			t.Errorf("the error does not say %q:\n%s", want, text)
		}
	}
	if took > 10*time.Second {
		t.Errorf("gave up after %s, want about the 1 s budget", took)
	}
	o.checkCommitsMatchTable()
	if r := replayProcess(t, o.dir, "run", "--yes", o.plan); r.code != exitOK {
		t.Fatalf("resumed run: %s", r)
	}
	o.checkExact(6000)
}

// SIGINT while the sink hangs (every write waits for the lock) ends within
// the documented 10 s, and the final message says that the batches in
// flight were not committed, not that they were; the commits match the
// table exactly, and the resume finishes.
func TestSinkOutageSignal(t *testing.T) {
	t.Parallel()
	o := newOutage(t, 6000, 1000, nil, "")
	p := o.start(500)
	o.lockTable()
	o.waitLockWaiters(outagePartitions) // both partitions' writes wait for the lock
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.result()
	took := time.Since(start)
	o.unlock()
	t.Logf("ended %s after SIGINT:\n%s", took.Round(time.Millisecond), r.text())
	if r.code != exitFailed {
		t.Fatalf("want exit %d after SIGINT, got %s", exitFailed, r)
	}
	if took > 10500*time.Millisecond {
		t.Errorf("the run took %s to stop after SIGINT, want at most 10 s", took)
	}
	text := r.text()
	if !strings.Contains(text, "the sink was failing, so the batch in flight was not written (or not confirmed) and is not committed on orders/") ||
		strings.Contains(text, "interrupted: the in-flight batches were written and committed") {
		t.Errorf("the message does not say the batches in flight were abandoned:\n%s", text)
	}
	if !strings.Contains(text, "resume with: replay run "+o.plan+" --yes") {
		t.Errorf("no resume command:\n%s", text)
	}
	o.checkCommitsMatchTable()
	if r := replayProcess(t, o.dir, "run", "--yes", o.plan); r.code != exitOK {
		t.Fatalf("resumed run: %s", r)
	}
	o.checkExact(6000)
}

// freezeProxy forwards TCP connections to target until freeze: from then
// on it forwards nothing more in either direction and new connections get
// no answer, as from a database server that stopped (SIGSTOP, a VM paused
// mid-failover): the kernel still accepts, nothing replies.
type freezeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	thawed chan struct{} // closed by thaw; nil while the proxy forwards
	// held counts the requests (reads from a client) held since freeze.
	held atomic.Int32
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.thaw(); wg.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.handle(c) }()
		}
	}()
	return p
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed == nil {
		p.held.Store(0)
		p.thawed = make(chan struct{})
	}
}

func (p *freezeProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed != nil {
		close(p.thawed)
		p.thawed = nil
	}
}

// waitThawed returns once the proxy forwards (at once when it is not
// frozen); request says the caller holds a client's request.
func (p *freezeProxy) waitThawed(request bool) {
	p.mu.Lock()
	thawed := p.thawed
	p.mu.Unlock()
	if thawed != nil {
		if request {
			p.held.Add(1)
		}
		<-thawed
	}
}

func (p *freezeProxy) handle(c net.Conn) {
	defer c.Close()
	p.waitThawed(false) // a new connection while frozen: no answer
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.waitThawed(src == c) // held, never forwarded while frozen
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
}

// SIGINT while the database is frozen (it accepts connections and answers
// nothing, cancel requests included) ends within the documented 10 s, with
// a message that says the batches in flight were not committed; the
// commits match the table, and a resume finishes.
func TestSinkFrozenSignal(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFreezeProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	o := newOutage(t, 6000, 1000, nil, "")
	// The plan's sink goes through the proxy; the test's own session does not.
	body, err := os.ReadFile(o.plan)
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := url.Parse(dsn)
	viaProxy := strings.Replace(string(body), "@"+direct.Host+"/", "@"+u.Host+"/", 1)
	if viaProxy == string(body) {
		t.Fatalf("the plan's DSN does not name %s:\n%s", direct.Host, body)
	}
	if err := os.WriteFile(o.plan, []byte(viaProxy), 0o644); err != nil {
		t.Fatal(err)
	}
	p := o.start(500)
	proxy.freeze()
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, func() bool {
		return proxy.held.Load() > 0
	}, "a write held by the frozen server")
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.result()
	took := time.Since(start)
	t.Logf("ended %s after SIGINT:\n%s", took.Round(time.Millisecond), r.text())
	if r.code != exitFailed {
		t.Fatalf("want exit %d after SIGINT, got %s", exitFailed, r)
	}
	// The run gives its writes SignalTime-500ms after the signal; the rest
	// is signal delivery, exit and Wait, slow on a loaded machine.
	if took > runner.SignalTime+1500*time.Millisecond {
		t.Errorf("the run took %s to stop after SIGINT, want at most %s and the exit", took, runner.SignalTime)
	}
	text := r.text()
	if !strings.Contains(text, "the sink was failing, so the batch in flight was not written (or not confirmed) and is not committed on orders/") ||
		strings.Contains(text, "interrupted: the in-flight batches were written and committed") {
		t.Errorf("the message does not say the batches in flight were abandoned:\n%s", text)
	}
	o.checkCommitsWithin(100) // one batch per partition may have landed unconfirmed
	proxy.thaw()
	if r := replayProcess(t, o.dir, "run", "--yes", o.plan); r.code != exitOK {
		t.Fatalf("resumed run: %s", r)
	}
	o.checkExact(6000)
}

// TestSignalWhileTheSinkOpens: SIGINT while the sink is still opening (its
// table locked by another session) ends the run with exit 1 saying that
// nothing was written and how to resume; the resume then writes the
// window.
func TestSignalWhileTheSinkOpens(t *testing.T) {
	o := newOutage(t, 200, 0, nil, "")
	if _, err := o.conn.Exec(t.Context(), "CREATE TABLE "+o.table+" (key text PRIMARY KEY, topic text, partition int, \"offset\" bigint, \"timestamp\" timestamptz, value jsonb, value_bytes bytea, kafka_key bytea, headers jsonb)"); err != nil {
		t.Fatal(err)
	}
	tx, err := o.conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+o.table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var holder int32
	if err := tx.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, o.dir, "run", "--yes", o.plan)
	other := testenv.PgConn(t, testenv.Postgres(t))
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		if p.exited() {
			t.Fatalf("the run ended before it waited for the lock: %s", p.result())
		}
		// A backend of this run waits for this test's lock (other tests'
		// runs wait for their own).
		var waiting bool
		err := other.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'replay:outage' AND $1 = ANY(pg_blocking_pids(pid)))", holder).Scan(&waiting)
		return err == nil && waiting
	}, "the run never waited for the table's lock")
	_ = p.cmd.Process.Signal(os.Interrupt)
	r := p.result()
	if r.code != exitFailed || !strings.Contains(r.text(), "nothing was written or committed") || !strings.Contains(r.text(), "resume with: ") {
		t.Fatalf("SIGINT while the sink opens: want exit 1 saying nothing was written and how to resume, got %s", r)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := replayProcess(t, o.dir, "run", "--yes", o.plan); r.code != exitOK {
		t.Fatalf("resume: %s", r)
	}
	if n := o.count(); n != 200 {
		t.Fatalf("the table holds %d rows after the resume, want 200", n)
	}
}
