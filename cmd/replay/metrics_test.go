package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/replay-tool/replay/internal/testenv"
)

// gateWriter holds the write of the run's last summary line (or of the
// first write holding on) until the test opens the gate: the run is over,
// its metrics server still up.
type gateWriter struct {
	testenv.Buffer
	reached, open chan struct{}
	once          sync.Once
	on            string
}

func (g *gateWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), cmp.Or(g.on, " records written to ")) {
		g.once.Do(func() { close(g.reached) })
		<-g.open
	}
	return g.Buffer.Write(b)
}

// scrape reads the metric families of url (nil when nothing answers).
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// value is the sum of the samples of the family name.
func value(fams map[string]*dto.MetricFamily, name string) float64 {
	v := 0.0
	for _, m := range fams[name].GetMetric() {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v
}

// TestMetrics: `replay run --metrics-addr 127.0.0.1:0` logs the address it
// bound and serves the run's progress there while it runs: every metric
// with the plan, topic and group labels (and partition or reason), counters
// that only grow, and at the end the records written; the server is gone
// when the command returns.
func TestMetrics(t *testing.T) {
	sb, seed := newCluster(t, 3, 6000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "metrics", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(9 * time.Hour),
		recordsPerSecond: 1000, sink: fileSink(out, 50)}) // about 2000 records: 2 s
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("filter: value.status != \"cancelled\"\n") // records skipped as filtered
	f.Close()

	stdout := &gateWriter{reached: make(chan struct{}), open: make(chan struct{})}
	var stderr testenv.Buffer
	a := newApp(stdout, &stderr)
	root := a.root()
	root.SetArgs([]string{"run", "--yes", "--metrics-addr", "127.0.0.1:0", file})
	root.SetIn(strings.NewReader(""))
	exit := make(chan int, 1)
	go func() { exit <- a.exitCode(root.ExecuteContext(context.Background())) }()
	release := sync.OnceFunc(func() { close(stdout.open) })
	defer release() // a failed test lets the command end

	var url string
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		for _, l := range lines(stderr.String()) {
			var m struct{ Message, URL string }
			if json.Unmarshal([]byte(l), &m) == nil && m.Message == "serving Prometheus metrics" {
				url = m.URL
			}
		}
		return url != ""
	}, func() string { return "no metrics address logged:\n" + stderr.String() })
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0/metrics") {
		t.Fatalf("logged metrics URL %q: want the bound port", url)
	}

	labels := map[string]string{"plan": "metrics", "topic": "orders", "group": "replay.metrics"}
	perPartition := map[string]bool{"replay_start_offset": true, "replay_committed_offset": true, "replay_end_offset": true, "replay_remaining_offsets": true, "replay_partition_done": true}
	check := func(fams map[string]*dto.MetricFamily, final bool) {
		t.Helper()
		for _, name := range []string{"replay_records_read_total", "replay_records_written_total", "replay_records_skipped_total",
			"replay_start_offset", "replay_committed_offset", "replay_end_offset", "replay_remaining_offsets", "replay_partition_done"} {
			fam := fams[name]
			if fam == nil {
				if name == "replay_records_skipped_total" && !final {
					continue // nothing filtered yet
				}
				t.Fatalf("no %s", name)
			}
			parts := map[string]bool{}
			for _, m := range fam.GetMetric() {
				got := map[string]string{}
				for _, l := range m.GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
				for k, v := range labels {
					if got[k] != v {
						t.Errorf("%s: label %s=%q, want %q", name, k, got[k], v)
					}
				}
				switch {
				case perPartition[name]:
					parts[got["partition"]] = true
				case name == "replay_records_skipped_total" && got["reason"] != "filtered":
					t.Errorf("%s: reason %q, want filtered", name, got["reason"])
				}
			}
			if perPartition[name] && (len(parts) != 3 || !parts["0"] || !parts["2"]) {
				t.Errorf("%s: partitions %v, want 0, 1 and 2", name, parts)
			}
		}
	}

	// During the run.
	var last map[string]*dto.MetricFamily
	during := 0
	for running := true; running; {
		select {
		case <-stdout.reached:
			running = false
		case <-time.After(50 * time.Millisecond):
			fams := scrape(t, url)
			if fams == nil {
				t.Fatalf("nothing serves %s during the run:\n%s", url, stderr.String())
			}
			check(fams, false)
			if last != nil {
				for _, name := range []string{"replay_records_read_total", "replay_records_written_total", "replay_committed_offset", "replay_partition_done"} {
					if value(fams, name) < value(last, name) {
						t.Errorf("%s went back from %v to %v", name, value(last, name), value(fams, name))
					}
				}
			}
			if w := value(fams, "replay_records_written_total"); w > 0 && value(fams, "replay_partition_done") < 3 {
				during++
			}
			if value(fams, "replay_committed_offset") > value(fams, "replay_start_offset") && value(fams, "replay_partition_done") < 3 {
				// Past the first commit: a rate, and the time left at it.
				if value(fams, "replay_offsets_per_second") <= 0 || fams["replay_eta_seconds"] == nil {
					t.Errorf("past the first commit: offsets_per_second %v, eta_seconds present %v", value(fams, "replay_offsets_per_second"), fams["replay_eta_seconds"] != nil)
				}
			}
			last = fams
		}
	}
	if during == 0 {
		t.Error("no scrape saw the run in progress")
	}

	// The run is over, the summary not yet printed: the server is still up.
	fams := scrape(t, url)
	check(fams, true)
	written := float64(strings.Count(string(readFile(t, out)), "\n"))
	if got := value(fams, "replay_records_written_total"); got != written || written == 0 {
		t.Errorf("replay_records_written_total %v at the end, the output has %v records", got, written)
	}
	if value(fams, "replay_partition_done") != 3 || value(fams, "replay_remaining_offsets") != 0 ||
		value(fams, "replay_committed_offset") != value(fams, "replay_end_offset") {
		t.Errorf("at the end: done %v, remaining %v, committed %v, end %v", value(fams, "replay_partition_done"),
			value(fams, "replay_remaining_offsets"), value(fams, "replay_committed_offset"), value(fams, "replay_end_offset"))
	}
	if value(fams, "replay_records_read_total") != written+value(fams, "replay_records_skipped_total") {
		t.Errorf("read %v != written %v + skipped %v", value(fams, "replay_records_read_total"), written, value(fams, "replay_records_skipped_total"))
	}
	release()
	if code := <-exit; code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics server still answers after the command returned")
	}
	checkJSONLines(t, "stderr", stderr.String())
}

// An address that cannot be bound is a usage mistake found before
// anything runs: exit 2, nothing committed, nothing written.
func TestMetricsAddrInUse(t *testing.T) {
	sb, seed := newCluster(t, 3, 6000)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "busy", addr: sb.Addr, from: seed.From.Add(time.Hour), to: seed.From.Add(3 * time.Hour), sink: fileSink(out, 100)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	r := replay(t, "run", "--yes", "--metrics-addr", ln.Addr().String(), file)
	if r.code != exitInvalid || !strings.Contains(r.text(), "--metrics-addr") {
		t.Fatalf("want exit 2 naming --metrics-addr, got %s", r)
	}
	for part, cp := range checkpoints(t, file, 3) {
		if cp.Offset >= 0 {
			t.Errorf("partition %d committed %d: the run started", part, cp.Offset)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written: %v", err)
	}
}

// A schedule's run serves its metrics on a fixed port through every due
// interval: each interval in turn, so that at the end the series are the
// last interval's ranges (the listener is opened once, before anything
// runs).
func TestScheduleMetrics(t *testing.T) {
	_, dir, planFile, _ := scheduleSetup(t, 600, schedT0, schedT0.Add(3*time.Hour),
		fmt.Sprintf("{every: 1h, zone: UTC, start: %s}", schedT0.Format(time.RFC3339)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	report := filepath.Join(dir, "report.json")

	stdout := &gateWriter{reached: make(chan struct{}), open: make(chan struct{}), on: "ran 3 intervals"}
	var stderr testenv.Buffer
	a := newApp(stdout, &stderr)
	root := a.root()
	root.SetArgs([]string{"run", "--yes", "--metrics-addr", addr, "--report", report,
		"--at", schedT0.Add(3 * time.Hour).Format(time.RFC3339), planFile})
	root.SetIn(strings.NewReader(""))
	exit := make(chan int, 1)
	go func() { exit <- a.exitCode(root.ExecuteContext(context.Background())) }()
	release := sync.OnceFunc(func() { close(stdout.open) })
	defer release()
	select {
	case <-stdout.reached:
	case code := <-exit:
		t.Fatalf("exit %d before the schedule's summary\n%s\n%s", code, stdout.String(), stderr.String())
	}
	fams := scrape(t, "http://"+addr+"/metrics")
	release()
	if code := <-exit; code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if fams == nil {
		t.Fatalf("nothing serves %s at the end of the schedule's run", addr)
	}
	r := readRunReport(t, report)
	if len(r.Intervals) != 3 {
		t.Fatalf("%d intervals ran, want 3", len(r.Intervals))
	}
	want := map[string]float64{}
	for _, p := range r.Intervals[2].Report.Partitions {
		want[fmt.Sprint(p.Partition)] = float64(p.Start)
	}
	got := map[string]float64{}
	for _, m := range fams["replay_start_offset"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "partition" {
				got[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	if len(want) != 3 || !maps.Equal(got, want) {
		t.Errorf("replay_start_offset %v at the end, the last interval's starts are %v", got, want)
	}
	if n := strings.Count(stderr.String(), "serving Prometheus metrics"); n != 1 {
		t.Errorf("the metrics address was logged %d times, want once", n)
	}
}
