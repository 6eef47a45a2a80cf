package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner"
)

// The retries of the sink and of the dead-letter sink are exported beside
// the source's, as the progress snapshot counts them.
func TestRetryMetrics(t *testing.T) {
	c := newProgressCollector(&runner.Job{Plan: &plan.Plan{Name: "p", Group: "g"}, Resolution: &runner.Resolution{Topic: "orders"}})
	c.progress = func() runner.Snapshot {
		return runner.Snapshot{SourceRetries: 3, SinkRetries: 7, DeadLetterRetries: 2}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for name, want := range map[string]float64{"replay_source_retries_total": 3, "replay_sink_retries_total": 7, "replay_dead_letter_retries_total": 2} {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got, found := 0.0, false
		for _, f := range fams {
			if f.GetName() == name && len(f.GetMetric()) == 1 {
				got, found = f.GetMetric()[0].GetCounter().GetValue(), true
			}
		}
		if !found || got != want {
			t.Errorf("%s = %v (found %v), want %v", name, got, found, want)
		}
	}
}
