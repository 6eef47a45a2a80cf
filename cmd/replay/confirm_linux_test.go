//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/replay-tool/replay/internal/testenv"
)

// openPTY opens a pseudo-terminal pair: what is written to master arrives
// on tty, a real terminal (isatty says so), one line at a time.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var unlock int32
	var n uint32
	if err := ioctl(m, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Skipf("unlock pty: %v", err)
	}
	if err := ioctl(m, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// replayOnTerminal runs the command with stdin on a terminal where the
// user types input (nothing: Ctrl-D).
func replayOnTerminal(t *testing.T, input string, args ...string) result {
	t.Helper()
	master, tty := openPTY(t)
	if input == "" {
		input = "\x04" // Ctrl-D: the reader sees end of file
	}
	if _, err := master.WriteString(input); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testenv.Buffer
	a := newApp(&stdout, &stderr)
	root := a.root()
	root.SetArgs(args)
	root.SetIn(tty)
	code := a.exitCode(root.ExecuteContext(context.Background()))
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// TestRunConfirmation: run asks on a terminal and writes nothing unless
// the answer is yes; off a terminal (a scheduler) it never asks and
// requires --yes, before it connects or commits anything.
func TestRunConfirmation(t *testing.T) {
	sb, seed := newCluster(t, 2, 2000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "confirm", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(3 * time.Hour), sink: fileSink(out, 100)})
	untouched := func(what string) {
		t.Helper()
		if n := lineCount(t, out); n != 0 {
			t.Errorf("%s: %d records written", what, n)
		}
		for p, cp := range checkpoints(t, file, 2) {
			if cp.Offset != -1 {
				t.Errorf("%s: partition %d committed %d", what, p, cp.Offset)
			}
		}
	}

	r := replay(t, "run", file)
	if r.code != exitInvalid || !strings.Contains(r.text(), "add --yes") || !strings.Contains(r.text(), "not a terminal") {
		t.Fatalf("no terminal, no --yes: want exit %d saying to add --yes, got %s", exitInvalid, r)
	}
	untouched("no terminal")

	r = replayOnTerminal(t, "n\n", "run", file)
	if r.code != exitFailed || !strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.text(), "cancelled") || !strings.Contains(r.stdout, "PARTITION") {
		t.Fatalf("answered n: want the table, the question and exit %d, got %s", exitFailed, r)
	}
	untouched("answered n")
	r = replayOnTerminal(t, "", "run", file) // EOF: no answer is a no
	if r.code != exitFailed {
		t.Fatalf("no answer: want exit %d, got %s", exitFailed, r)
	}
	untouched("no answer")

	r = replayOnTerminal(t, "yes\n", "run", file)
	if r.code != exitOK || lineCount(t, out) == 0 {
		t.Fatalf("answered yes: %s", r)
	}
	r = replayOnTerminal(t, "", "run", file) // nothing to do: nothing to ask
	if r.code != exitOK || strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("nothing to do: want exit 0 without a question, got %s", r)
	}

	// --restart (another version of the plan) says what it discards.
	changed := writePlan(t, dir, planSpec{name: "confirm", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(4 * time.Hour), sink: fileSink(out, 100)})
	r = replayOnTerminal(t, "n\n", "run", "--restart", changed)
	if r.code != exitFailed || !strings.Contains(r.stderr, "--restart discards the checkpoints") {
		t.Fatalf("--restart answered n: %s", r)
	}
	if r := replay(t, "run", "--restart", changed); r.code != exitInvalid {
		t.Fatalf("--restart without a terminal or --yes: want exit %d, got %s", exitInvalid, r)
	}
	if r := replay(t, "run", "--restart", "--yes", changed); r.code != exitOK {
		t.Fatalf("--restart --yes: %s", r)
	}
}

// Regression: Ctrl-C at the [y/N] question said "finishing the in-flight
// batch and committing" when no run was in progress: it says cancelled.
func TestSignalAtConfirmation(t *testing.T) {
	_, tty := openPTY(t)
	sb, seed := newCluster(t, 1, 100)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "ask", addr: sb.Addr, from: seed.From, to: seed.To, sink: fileSink(out, 100)})
	cmd, stdout, stderr := startAtPrompt(t, tty, `\[y/N\]`, "run", file)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if r.code != exitFailed || !strings.Contains(r.text(), "interrupt: cancelled") || strings.Contains(r.text(), "in-flight") ||
		!strings.Contains(r.text(), "cancelled: nothing was written and no checkpoint changed") {
		t.Fatalf("want exit %d saying cancelled, got %s", exitFailed, r)
	}
	if lineCount(t, out) != 0 {
		t.Error("records were written")
	}
}

// Ctrl-C at reset's confirmation ends the command at once, deleting
// nothing; it used to print "cancelled" and wait for Enter.
func TestSignalAtResetConfirmation(t *testing.T) {
	_, tty := openPTY(t)
	sb, seed := newCluster(t, 1, 100)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "ask-reset", addr: sb.Addr, from: seed.From, to: seed.To, sink: fileSink(out, 100)})
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	before := checkpoints(t, file, 1)
	cmd, stdout, stderr := startAtPrompt(t, tty, `Type the group name`, "reset", file)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("reset still waited for an answer 10 s after SIGINT:\n%s", stderr.String())
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if r.code != exitFailed || !strings.Contains(r.text(), "nothing was deleted") {
		t.Fatalf("want exit %d saying nothing was deleted, got %s", exitFailed, r)
	}
	if after := checkpoints(t, file, 1); after[0].Offset != before[0].Offset || after[0].Offset <= 0 {
		t.Errorf("the group's commit moved from %d to %d", before[0].Offset, after[0].Offset)
	}
}

// startAtPrompt starts the command with args as a child process whose
// stdin is the terminal tty, and waits until stderr shows prompt.
func startAtPrompt(t *testing.T, tty *os.File, prompt string, args ...string) (*exec.Cmd, *testenv.Buffer, *testenv.Buffer) {
	t.Helper()
	var stdout, stderr testenv.Buffer
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &stderr, prompt)
	return cmd, &stdout, &stderr
}
