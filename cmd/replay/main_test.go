package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
	"github.com/replay-tool/replay/runner/group"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/sinks/registry"
)

// execEnv makes the test binary behave as the replay command: the tests
// that need a real process (signals, SIGKILL) re-execute themselves with it,
// so the process under test is this package's main, built once by go test
// (with -race when the tests are).
const execEnv = "REPLAY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Args = append([]string{"replay"}, os.Args[1:]...)
		main()
		return // main exits
	}
	// Local run records of the tests' plans go to a directory of this test
	// binary (its child processes inherit it), never the user's.
	dir, err := os.MkdirTemp("", "replay-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv(stateEnv, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one invocation of the command produced.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// replay runs the command in-process, as main does, with captured streams.
func replay(t *testing.T, args ...string) result {
	t.Helper()
	return replayWith(t, nil, args...)
}

// replayWith is replay with the app adjusted by set (nil: as main builds it).
func replayWith(t *testing.T, set func(*app), args ...string) result {
	t.Helper()
	var stdout, stderr testenv.Buffer
	a := newApp(&stdout, &stderr)
	if set != nil {
		set(a)
	}
	root := a.root()
	root.SetArgs(args)
	a.args = args
	root.SetIn(strings.NewReader("")) // not a terminal, as under a scheduler, whatever runs go test
	code := a.exitCode(root.ExecuteContext(context.Background()))
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// command returns the replay command as a child process (see execEnv).
// Its output may be read while it runs.
func command(t *testing.T, dir string, args ...string) (*exec.Cmd, *testenv.Buffer, *testenv.Buffer) {
	t.Helper()
	var stdout, stderr testenv.Buffer
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// process is a `replay` child process, started by startProcess.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *testenv.Buffer
	// done is closed when the process has exited.
	done chan struct{}
}

// startProcess starts the replay command as a child process in dir (see
// command); when the test ends, a process still running is killed and
// waited for.
func startProcess(t *testing.T, dir string, args ...string) *process {
	t.Helper()
	cmd, stdout, stderr := command(t, dir, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// result waits for the process to exit.
func (p *process) result() result {
	<-p.done
	return result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends the process SIGKILL (a crash: nothing of it runs after) and
// waits until it has exited.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// replayProcess runs the command as a child process to completion.
func replayProcess(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd, stdout, stderr := command(t, dir, args...)
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("replay %s: %v", strings.Join(args, " "), err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// newCluster starts an embedded broker with topic orders and seeds it with
// n order events stamped over the last 24 hours.
func newCluster(t *testing.T, partitions int32, n int) (*testenv.Kafka, sandbox.Seed) {
	t.Helper()
	sb := testenv.NewKafka(t, testenv.Partitions(partitions), testenv.Topics("orders"))
	now := time.Now().UTC().Truncate(time.Second)
	seed := sandbox.Seed{Topic: "orders", N: n, From: now.Add(-24 * time.Hour), To: now}
	if n > 0 {
		sb.Seed(t, seed)
	}
	return sb, seed
}

// planSpec is the part of a test plan that varies.
type planSpec struct {
	name, addr, topic, group string
	from, to                 time.Time
	recordsPerSecond         int
	sink                     string // YAML flow mapping
}

// writePlan writes a plan file into dir and returns its path.
func writePlan(t *testing.T, dir string, s planSpec) string {
	t.Helper()
	if s.topic == "" {
		s.topic = "orders"
	}
	if s.group == "" {
		s.group = "replay." + s.name
	}
	body := fmt.Sprintf(`version: 1
name: %s
source: {brokers: [%q], topic: %s}
group: %s
window: {from: %s, to: %s}
throttle: {records_per_second: %d}
sink: %s
`, s.name, s.addr, s.topic, s.group, s.from.Format(time.RFC3339), s.to.Format(time.RFC3339), s.recordsPerSecond, s.sink)
	path := filepath.Join(dir, s.name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSink(path string, batch int) string {
	return fmt.Sprintf("{type: file, path: %q, batch_size: %d}", path, batch)
}

// checkpoints reads the committed offsets of the plan's group.
func checkpoints(t *testing.T, planFile string, partitions int32) map[int32]group.Checkpoint {
	t.Helper()
	p, err := plan.Load(planFile, plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := runner.Connect(ctx, p.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	cps, err := c.Checkpoints(ctx, p.Group, p.Source.Topic, parts)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// text is stderr as a person reads it: the message of each JSON log line,
// other lines as they are.
func (r result) text() string {
	var b strings.Builder
	for _, l := range lines(r.stderr) {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Message != "" {
			l = m.Message
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// lines splits s into its non-empty lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}
