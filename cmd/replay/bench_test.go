//go:build linux

package main

// BenchmarkReplayVsKcat measures replay against kcat on the file path: a
// full-day window of 1,000,000 records replayed into the JSONL file sink
// must run at least as fast as kcat reading the same window in the same
// run, with a peak RSS of at most 64 MiB. Each variant (benchVariants) is
// a sub-benchmark with its own seeded broker: uncompressed, zstd and lz4
// topics of 6 partitions, 1000 partitions, and batch_size 10000. See
// bench/README.md.
//
//	go test -run '^$' -bench ReplayVsKcat -benchtime 3x ./cmd/replay
//	go test -run '^$' -bench 'ReplayVsKcat/zstd' -benchtime 5x ./cmd/replay
//
// Setup (once per variant): build the replay binary into a temporary
// directory and start `replay sandbox --records N --partitions P
// --compression C` as a separate process, so the broker's memory is not
// counted. Each round then runs, as subprocesses and in alternating order,
// kcat and `replay run` on a fresh plan (its own name and group), and
// checks that both outputs hold exactly N lines.
//
// Environment:
//
//	REPLAY_BENCH_RECORDS  records to seed and replay (default 1000000)
//	REPLAY_BENCH_BROKERS  use this already seeded broker (e.g. a running
//	                      `replay sandbox --records N`) instead of starting one;
//	                      it must hold exactly REPLAY_BENCH_RECORDS records in
//	                      topic "orders", all stamped in the last 25 hours;
//	                      select the variant it was seeded for with -bench
//
// Reported (median over the rounds, peak RSS as the maximum): replay-rec/s,
// kcat-rec/s, x-kcat (replay/kcat), replay-peak-MiB / kcat-peak-MiB and
// replay-GCs (GC cycles of a replay run, from GODEBUG=gctrace=1); every
// round is logged too. Skipped when kcat (or kafkacat) is not installed.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/runner/sandbox"
)

const benchTopic = "orders"

type benchRun struct {
	elapsed time.Duration
	rssMiB  float64
	// anonMiB and fileMiB split the largest resident set sampled (where
	// the benchmark samples it: see benchRSS).
	anonMiB, fileMiB float64
	lines            int
	// gcs counts GC cycles (gctrace lines on stderr); replay only.
	gcs int
}

func (r benchRun) rate() float64 { return float64(r.lines) / r.elapsed.Seconds() }

// benchVariant is one row of the benchmark: how the topic is seeded and
// how the plan writes it.
type benchVariant struct {
	name        string
	compression string // sandbox --compression
	partitions  int
	batchSize   int // sink.batch_size; 0: the default
}

// benchVariants are the rows BenchmarkReplayVsKcat runs, each against its
// own seeded broker, with kcat in the same rounds.
var benchVariants = []benchVariant{
	{name: "none-6p", compression: "none", partitions: 6},
	{name: "zstd-6p", compression: "zstd", partitions: 6},
	{name: "lz4-6p", compression: "lz4", partitions: 6},
	{name: "none-1000p", compression: "none", partitions: 1000},
	{name: "none-6p-batch10000", compression: "none", partitions: 6, batchSize: 10000},
}

func BenchmarkReplayVsKcat(b *testing.B) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if kcat, err = exec.LookPath("kafkacat"); err != nil {
			b.Skip("kcat is not installed (apt-get install kcat)")
		}
	}
	records := 1_000_000
	if s := os.Getenv("REPLAY_BENCH_RECORDS"); s != "" {
		if records, err = strconv.Atoi(s); err != nil || records < 1 {
			b.Fatalf("REPLAY_BENCH_RECORDS=%q: want a positive number", s)
		}
	}
	dir := b.TempDir()
	bin := benchBuildReplay(b, dir)
	for _, v := range benchVariants {
		b.Run(v.name, func(b *testing.B) { benchReplayVsKcat(b, v, kcat, bin, dir, records) })
	}
}

func benchReplayVsKcat(b *testing.B, v benchVariant, kcat, bin, dir string, records int) {
	addr := os.Getenv("REPLAY_BENCH_BROKERS")
	if addr == "" {
		addr = benchStartSandbox(b, bin, records, v)
	}
	b.Logf("broker %s, topic %s, %d records, %d partitions, compression %s; replay %s; %s", addr, benchTopic, records, v.partitions, v.compression, bin, kcat)

	var replays, kcats []benchRun
	round := 0
	for b.Loop() {
		round++
		var k, r benchRun
		if round%2 == 1 { // alternate the order: page cache, CPU frequency, the broker's warm-up
			k = benchKcat(b, kcat, addr, dir)
			r = benchReplay(b, bin, addr, dir, round, v)
		} else {
			r = benchReplay(b, bin, addr, dir, round, v)
			k = benchKcat(b, kcat, addr, dir)
		}
		if k.lines != records || r.lines != records {
			b.Fatalf("round %d: kcat wrote %d lines, replay %d; want %d each", round, k.lines, r.lines, records)
		}
		b.Logf("round %d: replay %.2fs %.0f rec/s %.1f MiB %d GCs | kcat %.2fs %.0f rec/s %.1f MiB | %.2fx kcat",
			round, r.elapsed.Seconds(), r.rate(), r.rssMiB, r.gcs, k.elapsed.Seconds(), k.rate(), k.rssMiB, r.rate()/k.rate())
		replays, kcats = append(replays, r), append(kcats, k)
	}

	rates := func(rs []benchRun) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = r.rate()
		}
		return out
	}
	ratios := make([]float64, len(replays))
	for i := range replays {
		ratios[i] = replays[i].rate() / kcats[i].rate()
	}
	rss := func(rs []benchRun) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = r.rssMiB
		}
		return out
	}
	gcs := make([]float64, len(replays))
	for i, r := range replays {
		gcs[i] = float64(r.gcs)
	}
	b.ReportMetric(0, "ns/op") // one op is two programs and a line count: meaningless
	b.ReportMetric(benchMedian(rates(replays)), "replay-rec/s")
	b.ReportMetric(benchMedian(rates(kcats)), "kcat-rec/s")
	b.ReportMetric(benchMedian(ratios), "x-kcat")
	b.ReportMetric(slices.Max(rss(replays)), "replay-peak-MiB")
	b.ReportMetric(slices.Max(rss(kcats)), "kcat-peak-MiB")
	b.ReportMetric(benchMedian(gcs), "replay-GCs")
	b.Logf("%s over %d rounds (min / median / max): replay rec/s %s; kcat rec/s %s; x-kcat %s; replay peak RSS MiB %s; replay GC cycles %s",
		v.name, len(replays), benchSpread(rates(replays), "%.0f"), benchSpread(rates(kcats), "%.0f"), benchSpread(ratios, "%.2f"), benchSpread(rss(replays), "%.1f"), benchSpread(gcs, "%.0f"))
}

// benchBuildReplay builds this package's binary into dir.
func benchBuildReplay(b *testing.B, dir string) string {
	b.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("the go command is needed to build replay: %v", err)
	}
	bin := filepath.Join(dir, "replay")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchStartSandbox runs `replay sandbox` as its own process (port 0: a free
// port), waits for its ready line and returns the broker address. The
// process is interrupted at cleanup and killed if the benchmark dies.
func benchStartSandbox(b *testing.B, bin string, records int, v benchVariant) string {
	b.Helper()
	cmd := exec.Command(bin, "sandbox", "--port", "0", "--partitions", strconv.Itoa(v.partitions), "--compression", v.compression,
		"--topic", benchTopic, "--records", strconv.Itoa(records))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// "Kafka sandbox on 127.0.0.1:PORT: topic orders (...). Ctrl-C to stop."
			if rest, ok := strings.CutPrefix(sc.Text(), "Kafka sandbox on "); ok {
				addr, _, _ := strings.Cut(rest, ": ")
				ready <- addr
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	select {
	case addr := <-ready:
		b.Logf("sandbox seeded %d records in %s (pid %d)", records, time.Since(start).Round(time.Millisecond), cmd.Process.Pid)
		return addr
	case <-exited:
		b.Fatalf("replay sandbox exited before it was ready: %v\n%s", cmd.ProcessState, stderr.String())
	case <-time.After(10 * time.Minute):
		b.Fatalf("replay sandbox not ready after 10 minutes\n%s", stderr.String())
	}
	return ""
}

// benchKcat reads the day window (from 25 h ago to now) as kcat documents it:
// key TAB value per line, exiting at the end offsets.
func benchKcat(b *testing.B, kcat, addr, dir string) benchRun {
	b.Helper()
	now := time.Now()
	out := filepath.Join(dir, "kcat.out")
	cmd := exec.Command(kcat, "-C", "-b", addr, "-t", benchTopic,
		"-o", fmt.Sprintf("s@%d", now.Add(-25*time.Hour).UnixMilli()), "-o", fmt.Sprintf("e@%d", now.UnixMilli()),
		"-e", "-q", "-f", `%k\t%s\n`)
	return benchRunTimed(b, cmd, out, out)
}

// benchReplay replays the same window into the file sink with a fresh plan,
// so nothing is resumed from an earlier round.
func benchReplay(b *testing.B, bin, addr, dir string, round int, v benchVariant) benchRun {
	b.Helper()
	name := fmt.Sprintf("bench-%d-%d-%d", os.Getpid(), round, time.Now().UnixNano())
	out := filepath.Join(dir, "replay.jsonl")
	planFile := filepath.Join(dir, name+".yaml")
	yaml := fmt.Sprintf(`version: 1
name: %s
description: BenchmarkReplayVsKcat round %d, the full day into a JSONL file.
owner: bench
source:
  brokers: [%q]
  topic: %s
  partitions: all
group: replay.%s
window:
  from: -25h
sink:
  type: file
  path: %s
`, name, round, addr, benchTopic, name, out)
	if v.batchSize > 0 {
		yaml += fmt.Sprintf("  batch_size: %d\n", v.batchSize)
	}
	if err := os.WriteFile(planFile, []byte(yaml), 0o644); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(planFile)
	cmd := exec.Command(bin, "run", "--yes", "--log-level", "warn", planFile)
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1") // one "gc N @..." line per cycle on stderr
	return benchRunTimed(b, cmd, "", out)
}

// benchSampleHWM returns the last VmHWM (peak resident set, KiB) read
// from /proc/PID/status, every 5 ms until stop is closed. The child's
// rusage Maxrss is not its own peak: os/exec starts children with
// CLONE_VM, and the kernel carries the parent's peak RSS into the child's
// at exec (a benchmark process that held a peer's rows reported that as
// replay's). VmHWM belongs to the child's own address space.
func benchSampleHWM(pid int, stop <-chan struct{}) int64 {
	return benchSampleRSS(pid, stop).hwm
}

// benchRSS is what benchSampleRSS read of a process, in KiB: its peak
// resident set (VmHWM), and at the largest resident set it sampled
// (VmRSS) the part that was anonymous memory (RssAnon: the Go runtime's
// heap, stacks and metadata, the C library's) and the part mapped from
// files (RssFile: the binary's own text and read-only data, as the
// kernel maps it from the page cache).
type benchRSS struct{ hwm, peak, anon, file int64 }

// benchSampleRSS reads /proc/PID/status every 5 ms until stop is closed
// (see benchSampleHWM for why not rusage).
func benchSampleRSS(pid int, stop <-chan struct{}) benchRSS {
	var out benchRSS
	path := fmt.Sprintf("/proc/%d/status", pid)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			var cur benchRSS
			for line := range strings.Lines(string(b)) {
				name, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					continue
				}
				switch name {
				case "VmHWM":
					cur.hwm = n
				case "VmRSS":
					cur.peak = n
				case "RssAnon":
					cur.anon = n
				case "RssFile":
					cur.file = n
				}
			}
			out.hwm = max(out.hwm, cur.hwm)
			if cur.peak > out.peak {
				out.peak, out.anon, out.file = cur.peak, cur.anon, cur.file
			}
		}
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
	}
}

// benchRunTimed runs cmd (stdout to file when file is set), timing it and taking
// its peak RSS, then counts the lines of output and removes it.
func benchRunTimed(b *testing.B, cmd *exec.Cmd, file, output string) benchRun {
	b.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if file != "" {
		f, err := os.Create(file)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	// Each timed run starts with the disk idle: the output of the run
	// before (kcat's unflushed file, the blocks freed by removing
	// replay's) is written back and discarded now, not while this run
	// waits on its own fsync.
	syscall.Sync()
	start := time.Now()
	err := cmd.Start()
	var hwm int64
	if err == nil {
		stop := make(chan struct{})
		sampled := make(chan int64)
		go func() { sampled <- benchSampleHWM(cmd.Process.Pid, stop) }()
		err = cmd.Wait()
		close(stop)
		hwm = <-sampled
	}
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	lines, err := benchCountLines(output)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(output); err != nil {
		b.Fatal(err)
	}
	rss := float64(hwm) / 1024
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && hwm == 0 {
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux; see benchSampleHWM
	}
	gcs := 0
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "gc ") {
			gcs++
		}
	}
	return benchRun{elapsed: elapsed, rssMiB: rss, lines: lines, gcs: gcs}
}

func benchCountLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n := 0
	for {
		m, err := f.Read(buf)
		n += bytes.Count(buf[:m], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func benchMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func benchSpread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format+" / "+format+" / "+format, slices.Min(xs), benchMedian(xs), slices.Max(xs))
}

// BenchmarkKafkaSinkVsKcat measures the kafka sink (at least once) against
// kcat copying the same topic, `kcat -C … | kcat -P …` (key and value; kcat
// drops the headers), on one in-process broker, in the same run:
//
//	go test -run '^$' -bench KafkaSinkVsKcat -benchtime 5x ./cmd/replay
//
// Each round runs, in an order that rotates, the kcat pipe, replay with the
// default message key (the source key) and replay with key: '{{ .Key }}',
// each into a fresh target topic with a fresh plan, and checks that every
// target holds every record. REPLAY_BENCH_KAFKA_RECORDS sets the records
// (default 200000, 4 partitions); REPLAY_BENCH_CPU_PROFILE=DIR writes a CPU
// profile of each replay run there. Reported (median over the rounds):
// kcat-rec/s, default-rec/s, key-rec/s, and x-kcat-default / x-kcat-key
// (kcat's wall time ÷ replay's, per round; above 1: replay is faster).
func BenchmarkKafkaSinkVsKcat(b *testing.B) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		b.Skip("kcat is not installed (apt-get install kcat)")
	}
	records := 200_000
	if s := os.Getenv("REPLAY_BENCH_KAFKA_RECORDS"); s != "" {
		if records, err = strconv.Atoi(s); err != nil || records < 1 {
			b.Fatalf("REPLAY_BENCH_KAFKA_RECORDS=%q: want a positive number", s)
		}
	}
	sb := testenv.NewKafka(b, testenv.Partitions(eosPartitions), testenv.Topics("orders"))
	end := time.Now().UTC().Truncate(time.Second)
	seed := sb.Seed(b, sandbox.Seed{Topic: "orders", N: records, From: end.Add(-24 * time.Hour), To: end})
	dir := b.TempDir()
	replayRun := func(kind string, round int, key string) time.Duration {
		name := fmt.Sprintf("bench-kafka-%s-%d", kind, round)
		sb.CreateTopic(b, name, eosPartitions, nil)
		extra := ""
		if key != "" {
			extra = fmt.Sprintf(", key: %q", key)
		}
		body := fmt.Sprintf("version: 1\nname: %s\nsource: {brokers: [%q], topic: orders}\ngroup: replay.%s\nwindow: {from: %s, to: %s}\nsink: {type: kafka, brokers: [%q], topic: %s%s}\n",
			name, sb.Addr, name, seed.From.Add(-time.Hour).Format(time.RFC3339), end.Format(time.RFC3339), sb.Addr, name, extra)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		args := []string{"run", "--yes", "--log-level", "warn", path}
		if pdir := os.Getenv("REPLAY_BENCH_CPU_PROFILE"); pdir != "" {
			args = append(args, "--cpu-profile", filepath.Join(pdir, name+".pprof"))
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), execEnv+"=1")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", name, err, out)
		}
		elapsed := time.Since(start)
		benchCheckCount(b, sb, name, records)
		return elapsed
	}
	kcatRun := func(round int) time.Duration {
		topic := fmt.Sprintf("bench-kafka-kcat-%d", round)
		sb.CreateTopic(b, topic, eosPartitions, nil)
		pipe := fmt.Sprintf("%s -C -b %s -t orders -e -q -K '\\t' | %s -P -b %s -t %s -K '\\t'", kcat, sb.Addr, kcat, sb.Addr, topic)
		start := time.Now()
		if out, err := exec.Command("sh", "-c", pipe).CombinedOutput(); err != nil {
			b.Fatalf("kcat pipe: %v\n%s", err, out)
		}
		elapsed := time.Since(start)
		benchCheckCount(b, sb, topic, records)
		return elapsed
	}
	var kc, def, key, xDef, xKey []float64
	round := 0
	for b.Loop() {
		round++
		var k, d, y time.Duration
		steps := []func(){
			func() { k = kcatRun(round) },
			func() { d = replayRun("default", round, "") },
			func() { y = replayRun("key", round, "{{ .Key }}") },
		}
		for i := range steps { // rotate the order: the broker's warm-up, page cache, CPU frequency
			steps[(i+round)%len(steps)]()
		}
		rate := func(d time.Duration) float64 { return float64(records) / d.Seconds() }
		kc, def, key = append(kc, rate(k)), append(def, rate(d)), append(key, rate(y))
		xDef, xKey = append(xDef, k.Seconds()/d.Seconds()), append(xKey, k.Seconds()/y.Seconds())
		b.Logf("round %d: kcat pipe %.2fs %.0f rec/s | replay default key %.2fs %.0f rec/s (%.2fx kcat) | replay key '{{ .Key }}' %.2fs %.0f rec/s (%.2fx kcat)",
			round, k.Seconds(), rate(k), d.Seconds(), rate(d), xDef[len(xDef)-1], y.Seconds(), rate(y), xKey[len(xKey)-1])
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(benchMedian(kc), "kcat-rec/s")
	b.ReportMetric(benchMedian(def), "default-rec/s")
	b.ReportMetric(benchMedian(key), "key-rec/s")
	b.ReportMetric(benchMedian(xDef), "x-kcat-default")
	b.ReportMetric(benchMedian(xKey), "x-kcat-key")
	b.Logf("over %d rounds (min / median / max): x-kcat default %s; x-kcat key %s", len(xDef), benchSpread(xDef, "%.2f"), benchSpread(xKey, "%.2f"))
}
