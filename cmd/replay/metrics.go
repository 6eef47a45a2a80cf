package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/replay-tool/replay/runner"
)

// progressCollector exports a run's progress to Prometheus. It reads
// Job.Progress at each scrape: the run pays nothing between scrapes, and
// nothing is registered globally.
type progressCollector struct {
	progress func() runner.Snapshot
	read, written, skipped,
	start, committed, end, remaining, done *prometheus.Desc
	rate, eta                                   *prometheus.Desc
	outcomes, retries, sinkRetries, deadRetries *prometheus.Desc
}

func newProgressCollector(job *runner.Job) *progressCollector {
	labels := prometheus.Labels{"plan": job.Plan.Name, "topic": job.Resolution.Topic, "group": job.Plan.Group}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("replay_"+name, help, variable, labels)
	}
	return &progressCollector{
		progress:    job.Progress,
		read:        desc("records_read_total", "Records of the ranges delivered by the broker."),
		written:     desc("records_written_total", "Records written to the sink."),
		skipped:     desc("records_skipped_total", "Records not written, by reason (filtered, outside-window, dead-lettered, and under on_error: skip the error).", "reason"),
		start:       desc("start_offset", "Start of the partition's range: its first offset to replay.", "partition"),
		rate:        desc("offsets_per_second", "Offsets this process replayed (committed past) per second since its run started, over its partitions."),
		eta:         desc("eta_seconds", "Time left for this process's partitions at offsets_per_second; absent before the first commit."),
		committed:   desc("committed_offset", "Next offset to read: every offset below it is durable in the sink and committed to the replay group.", "partition"),
		end:         desc("end_offset", "End of the partition's range (exclusive).", "partition"),
		remaining:   desc("remaining_offsets", "Offsets of the partition's range not yet replayed.", "partition"),
		done:        desc("partition_done", "1 when the partition reached the end of its range.", "partition"),
		retries:     desc("source_retries_total", "Requests to the source cluster (fetches, commits, group calls, heartbeats) that failed with an error that may pass and were tried again."),
		sinkRetries: desc("sink_retries_total", "Writes to the sink that failed with a transient error and were tried again (one per try made again), and the calls the sink retried by itself (the exactly-once kafka sink's start, checkpoints and coordinator requests)."),
		deadRetries: desc("dead_letter_retries_total", "Writes to the dead-letter sink that failed with a transient error and were tried again (one per try made again)."),
		outcomes:    desc("sink_records_total", "Records of the sink's durable writes by what they did to the stored rows (inserted, updated, unchanged, ignored, deleted, absent, stale, duplicate), for sinks that can tell (the database sinks).", "outcome"),
	}
}

func (c *progressCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.start, c.rate, c.eta, c.read, c.written, c.skipped, c.committed, c.end, c.remaining, c.done, c.outcomes, c.retries, c.sinkRetries, c.deadRetries} {
		ch <- d
	}
}

func (c *progressCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.progress()
	ch <- prometheus.MustNewConstMetric(c.read, prometheus.CounterValue, float64(s.Read))
	ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(s.Written))
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(s.SourceRetries))
	ch <- prometheus.MustNewConstMetric(c.sinkRetries, prometheus.CounterValue, float64(s.SinkRetries))
	ch <- prometheus.MustNewConstMetric(c.deadRetries, prometheus.CounterValue, float64(s.DeadLetterRetries))
	for reason, n := range s.Skipped {
		ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(n), reason)
	}
	if o := s.SinkOutcomes; o != nil {
		for _, kv := range outcomeCounts(o, true) {
			ch <- prometheus.MustNewConstMetric(c.outcomes, prometheus.CounterValue, float64(kv.n), kv.name)
		}
	}
	var since int64 // offsets this run committed past
	for _, p := range s.Partitions {
		since += max(p.Next-p.From, 0)
	}
	if el := time.Since(s.Started).Seconds(); !s.Started.IsZero() && el > 0 {
		rate := float64(since) / el
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, rate)
		if rate > 0 {
			ch <- prometheus.MustNewConstMetric(c.eta, prometheus.GaugeValue, float64(s.Remaining)/rate)
		}
	}
	for _, p := range s.Partitions {
		part := strconv.Itoa(int(p.Partition))
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(p.Start), part)
		done := 0.0
		if p.Done {
			done = 1
		}
		ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(p.Next), part)
		ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(p.End), part)
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(p.Remaining()), part)
		ch <- prometheus.MustNewConstMetric(c.done, prometheus.GaugeValue, done, part)
	}
}

// metricsServer serves /metrics for one run (--metrics-addr).
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup
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

// serve starts serving the jobs' metrics (a plan of several topics has a
// job per topic, its series told apart by their topic label), from a
// goroutine that stop waits for.
func (m *metricsServer) serve(a *app, jobs ...*runner.Job) {
	if m == nil {
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, job := range jobs {
		reg.MustRegister(newProgressCollector(job))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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
