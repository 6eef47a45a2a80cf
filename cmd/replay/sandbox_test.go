package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
)

// TestSandboxWalkthrough: the sandbox steps of docs/operations.md. The banner names the
// seeded span (UTC) and partitions, and plans/sandbox-to-sqlite.yaml finds
// records there.
func TestSandboxWalkthrough(t *testing.T) {
	cmd, _, stderr := command(t, t.TempDir(), "sandbox", "--port", "0", "--partitions", "3", "--records", "2400")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	var banner string
	select {
	case banner = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatalf("no banner: %s", stderr)
	}
	re := regexp.MustCompile(`^Kafka sandbox on (127\.0\.0\.1:\d+): topic orders \(partitions 0-2, 2400 records stamped (\S+) to (\S+) UTC\)\. Ctrl-C to stop\.$`)
	m := re.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner %q", banner)
	}
	from, err1 := time.Parse("2006-01-02T15:04:05", m[2])
	to, err2 := time.Parse("2006-01-02T15:04:05", m[3])
	if err1 != nil || err2 != nil || to.Sub(from) != 24*time.Hour || time.Since(to) > time.Minute {
		t.Fatalf("banner span %s to %s", m[2], m[3])
	}
	t.Logf("%s", banner)
	t.Setenv("KAFKA_BROKERS", m[1])
	dir := t.TempDir()
	plan, err := filepath.Abs("../../plans/sandbox-to-sqlite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	r := replay(t, "run", "--yes", plan)
	// 2400 records over 24 h: about 200 in two hours.
	w := regexp.MustCompile(`(\d+) records written to sqlite table \S+ in \S+`).FindStringSubmatch(r.stdout)
	if r.code != 0 || w == nil || len(w[1]) < 2 {
		t.Fatalf("the sandbox plan found no records: %s", r)
	}
	t.Logf("%s", r.stdout)
}

// Found by a new user: the exactly-once walkthrough needs a target topic,
// and the sandbox (no auto-creation) had no way to make one.
func TestSandboxCreatesTargetTopics(t *testing.T) {
	cmd, _, stderr := command(t, t.TempDir(), "sandbox", "--port", "0", "--partitions", "2", "--create-topic", "orders-copy,orders-retry")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("no banner: %s", stderr)
	}
	banner := sc.Text()
	go io.Copy(io.Discard, out)
	m := regexp.MustCompile(`^Kafka sandbox on (127\.0\.0\.1:\d+): .*; empty topics orders-copy, orders-retry\. Ctrl-C to stop\.$`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner %q", banner)
	}
	meta := string(testenv.Kcat(t, "-b", m[1], "-L", "-J"))
	for _, topic := range []string{"orders", "orders-copy", "orders-retry"} {
		if !strings.Contains(meta, `"topic":"`+topic+`"`) {
			t.Errorf("topic %s missing from the sandbox's metadata: %s", topic, meta)
		}
	}
}

// The sandbox holds every record of its topics in memory, far above a
// run's soft heap limit: it must not run under that limit, where its GC
// ran without pause (233 cycles to seed 150,000 records, against 13)
// and took the CPU that clients reading from it needed.
func TestSandboxIsNotHeldToTheRunsHeapLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 150,000 records")
	}
	cmd, _, stderr := command(t, t.TempDir(), "sandbox", "--port", "0", "--partitions", "3", "--records", "150000")
	cmd.Env = append(cmd.Env, "GODEBUG=gctrace=1")
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // stderr is written by exec's copier
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && strings.HasPrefix(sc.Text(), "Kafka sandbox on ")
		io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("no banner; stderr: %.2000s", stderr)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the sandbox did not seed 150,000 records in 3 minutes")
	}
	mu.Lock()
	cycles := 0
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "gc ") {
			cycles++
		}
	}
	mu.Unlock()
	t.Logf("%d GC cycles to seed 150,000 records", cycles)
	if cycles > 60 {
		t.Errorf("%d GC cycles to seed 150,000 records, want at most 60: the sandbox runs under a soft heap limit below its live heap", cycles)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
