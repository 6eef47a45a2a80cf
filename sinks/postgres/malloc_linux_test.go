package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// A fresh load through the sink's connections does not make the server
// process give its heap back to the kernel and take it again around
// every batch: counted with strace on the backends (brk calls), which
// needs the server on this machine and strace. Without the connection's
// malloc warm-up, 20 COPY batches of 1000 rows made 2,120 brk calls
// here; with it, none.
func TestPostgresBackendsKeepTheirHeap(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	app := "replay-malloc-" + table
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, ApplicationName: app})
	batch := func(n int) []record.Record {
		out := make([]record.Record, 1000)
		for i := range out {
			off := int64(n*1000 + i)
			out[i] = sinktest.Rec(0, off, "k"+strconv.FormatInt(off, 10), fmt.Sprintf(`{"id":%d,"status":"paid","items":[{"sku":"a-%d","qty":2}],"note":"%0200d"}`, off, off, off))
		}
		return out
	}
	sinktest.MustWrite(t, s, batch(0)...) // the pool's connection is open
	rows, err := testenv.PgConn(t, dsn).Query(t.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Skipf("the server's process %d is not on this machine", pid)
		}
		args = append(args, "-p", strconv.Itoa(pid))
	}
	if rows.Err() != nil || len(args) == 0 {
		t.Fatalf("no connection of the sink found (%v)", rows.Err())
	}
	var out testenv.Buffer
	cmd := exec.Command(strace, append([]string{"-c", "-e", "trace=brk"}, args...)...)
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// strace says "Process N attached" for each backend, or why it cannot.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_ = testenv.WaitFor(ctx, time.Millisecond, func() bool {
		s := out.String()
		return strings.Count(s, " attached") >= len(args)/2 || strings.Contains(s, "ptrace")
	})
	for n := 1; n <= 20; n++ {
		sinktest.MustWrite(t, s, batch(n)...)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); !strings.Contains(out.String(), "attached") {
		t.Skipf("strace could not attach to the server's process (%v): %s", err, out.String())
	}
	calls := 0
	if m := regexp.MustCompile(`(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?brk\s*$`).FindStringSubmatch(out.String()); m != nil {
		calls, _ = strconv.Atoi(m[1])
	} else if strings.Contains(out.String(), "brk") {
		// strace -c prints no table when nothing was called; a table it
		// printed that this does not read must not pass as zero calls.
		t.Fatalf("cannot read the brk count in strace's summary:\n%s", out.String())
	}
	t.Logf("brk calls of the sink's backends over 20 batches: %d\n%s", calls, out.String())
	if calls > 100 {
		t.Errorf("the sink's backends made %d brk calls over 20 batches of 1000 rows, want at most 100: the server trims and regrows its heap around every batch", calls)
	}
}
