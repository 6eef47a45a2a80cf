package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replay-tool/replay/runner"
)

// The run's metrics are written in Prometheus's text exposition format
// (0.0.4) by writeMetrics, which reads Job.Progress at each scrape. Not
// through the Prometheus client library, whose import alone took about
// 6 MiB of every run's memory; the tests parse it with Prometheus's parser.

// metricFamily is one metric: its name (without replay_), help, type
// (counter or gauge) and its label beyond plan, topic and group ("" for
// none).
type metricFamily struct {
	name, help, typ, label string
	// samples appends the family's samples of one job's snapshot: the
	// label's value (when the family has one) and the value's text.
	samples func(s *runner.Snapshot, add func(label, value string))
}

// metricFamilies are the run's metrics, in the order they are written.
var metricFamilies = []metricFamily{
	{"records_read_total", "Records of the ranges delivered by the broker.", "counter", "", total(func(s *runner.Snapshot) int64 { return s.Read })},
	{"records_written_total", "Records written to the sink.", "counter", "", total(func(s *runner.Snapshot) int64 { return s.Written })},
	{"records_skipped_total", "Records not written, by reason (filtered, outside-window, dead-lettered, and under on_error: skip the error).", "counter", "reason",
		func(s *runner.Snapshot, add func(string, string)) {
			for _, reason := range slices.Sorted(maps.Keys(s.Skipped)) {
				add(reason, itoa(s.Skipped[reason]))
			}
		}},
	{"sink_records_total", "Records of the sink's durable writes by what they did to the stored rows (inserted, updated, unchanged, ignored, deleted, absent, stale, duplicate), for sinks that can tell (the database sinks).", "counter", "outcome",
		func(s *runner.Snapshot, add func(string, string)) {
			if s.SinkOutcomes != nil {
				for _, kv := range outcomeCounts(s.SinkOutcomes, true) {
					add(kv.name, itoa(kv.n))
				}
			}
		}},
	{"source_retries_total", "Requests to the source cluster (fetches, commits, group calls, heartbeats) that failed with an error that may pass and were tried again.", "counter", "",
		total(func(s *runner.Snapshot) int64 { return s.SourceRetries })},
	{"sink_retries_total", "Writes to the sink that failed with a transient error and were tried again (one per try made again), and the calls the sink retried by itself (the exactly-once kafka sink's start, checkpoints and coordinator requests).", "counter", "",
		total(func(s *runner.Snapshot) int64 { return s.SinkRetries })},
	{"dead_letter_retries_total", "Writes to the dead-letter sink that failed with a transient error and were tried again (one per try made again).", "counter", "",
		total(func(s *runner.Snapshot) int64 { return s.DeadLetterRetries })},
	{"offsets_per_second", "Offsets this process replayed (committed past) per second since its run started, over its partitions.", "gauge", "",
		func(s *runner.Snapshot, add func(string, string)) {
			if rate, ok := offsetRate(s); ok {
				add("", strconv.FormatFloat(rate, 'g', -1, 64))
			}
		}},
	{"eta_seconds", "Time left for this process's partitions at offsets_per_second; absent before the first commit.", "gauge", "",
		func(s *runner.Snapshot, add func(string, string)) {
			if rate, ok := offsetRate(s); ok && rate > 0 {
				add("", strconv.FormatFloat(float64(s.Remaining)/rate, 'g', -1, 64))
			}
		}},
	{"start_offset", "Start of the partition's range: its first offset to replay.", "gauge", "partition",
		partitionSamples(func(p runner.PartitionSnapshot) int64 { return p.Start })},
	{"committed_offset", "Next offset to read: every offset below it is durable in the sink and committed to the replay group.", "gauge", "partition",
		partitionSamples(func(p runner.PartitionSnapshot) int64 { return p.Next })},
	{"end_offset", "End of the partition's range (exclusive).", "gauge", "partition",
		partitionSamples(func(p runner.PartitionSnapshot) int64 { return p.End })},
	{"remaining_offsets", "Offsets of the partition's range not yet replayed.", "gauge", "partition",
		partitionSamples(func(p runner.PartitionSnapshot) int64 { return p.Remaining() })},
	{"partition_done", "1 when the partition reached the end of its range.", "gauge", "partition",
		partitionSamples(func(p runner.PartitionSnapshot) int64 {
			if p.Done {
				return 1
			}
			return 0
		})},
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// total is the one sample of a family without a label: f of the snapshot.
func total(f func(*runner.Snapshot) int64) func(*runner.Snapshot, func(string, string)) {
	return func(s *runner.Snapshot, add func(string, string)) { add("", itoa(f(s))) }
}

// partitionSamples is the samples of a per-partition family: f of each
// partition, labelled with its number.
func partitionSamples(f func(runner.PartitionSnapshot) int64) func(*runner.Snapshot, func(string, string)) {
	return func(s *runner.Snapshot, add func(string, string)) {
		for _, p := range s.Partitions {
			add(strconv.Itoa(int(p.Partition)), itoa(f(p)))
		}
	}
}

// offsetRate is the offsets this run committed past per second since it
// started; false before it started.
func offsetRate(s *runner.Snapshot) (float64, bool) {
	el := time.Since(s.Started).Seconds()
	if s.Started.IsZero() || el <= 0 {
		return 0, false
	}
	var since int64
	for _, p := range s.Partitions {
		since += max(p.Next-p.From, 0)
	}
	return float64(since) / el, true
}

// metricJob is a job whose metrics are served: its labels and its
// progress (Job.Progress).
type metricJob struct {
	plan, group, topic string
	progress           func() runner.Snapshot
}

// writeMetrics writes the metrics of jobs (a plan of several topics has a
// job per topic, its series told apart by their topic label) in the text
// exposition format, each family's HELP and TYPE once.
func writeMetrics(w io.Writer, jobs []metricJob) error {
	snaps := make([]runner.Snapshot, len(jobs))
	for i, job := range jobs {
		snaps[i] = job.progress()
	}
	var b []byte
	for _, f := range metricFamilies {
		name := "replay_" + f.name
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(f.help), name, f.typ)
		for i, job := range jobs {
			base := fmt.Sprintf("group=%s,plan=%s,topic=%s", labelValue(job.group), labelValue(job.plan), labelValue(job.topic))
			f.samples(&snaps[i], func(label, value string) {
				labels := base
				if f.label != "" {
					labels += "," + f.label + "=" + labelValue(label)
				}
				b = fmt.Appendf(b, "%s{%s} %s\n", name, labels, value)
			})
		}
	}
	_, err := w.Write(b)
	return err
}

// labelValue is v quoted as the exposition format wants a label value:
// backslash, double quote and line feed escaped.
func labelValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string { return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s) }

// metricsServer serves /metrics for one command (--metrics-addr): the
// jobs of the run, or of a schedule's interval running now.
type metricsServer struct {
	ln   net.Listener
	srv  *http.Server
	wg   sync.WaitGroup
	jobs atomic.Pointer[[]metricJob]
}

// listenMetrics opens addr before anything runs: an address that cannot
// be bound is a usage mistake (exit 2). Without addr it returns nil.
func listenMetrics(addr string) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	return &metricsServer{ln: ln}, nil
}

// serve serves the jobs' metrics (writeMetrics) from then on: the first
// call starts the server, in a goroutine that stop waits for; a later one
// (a schedule's next interval) replaces the jobs it shows.
func (m *metricsServer) serve(a *app, jobs ...*runner.Job) {
	if m == nil {
		return
	}
	mjobs := make([]metricJob, len(jobs))
	for i, j := range jobs {
		mjobs[i] = metricJob{plan: j.Plan.Name, group: j.Plan.Group, topic: j.Resolution.Topic, progress: j.Progress}
	}
	if m.jobs.Swap(&mjobs) != nil {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := writeMetrics(w, *m.jobs.Load()); err != nil {
			a.log.Debug().Err(err).Msg("metrics: write the answer")
		}
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.log.Info().Str("url", "http://"+m.ln.Addr().String()+"/metrics").Msg("serving Prometheus metrics")
	m.wg.Go(func() {
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("metrics server failed")
		}
	})
}

// stop shuts the server down (scrapes in flight finish) and waits for it,
// or closes the listener when it never served.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	if m.srv == nil {
		m.ln.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	m.wg.Wait()
}
