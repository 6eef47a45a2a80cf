package main

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/replay-tool/replay/runner"
)

// The retries of the sink and of the dead-letter sink are exported beside
// the source's, as the progress snapshot counts them; label values are
// escaped as the exposition format wants (Prometheus's parser reads them
// back).
func TestRetryMetrics(t *testing.T) {
	job := metricJob{plan: "p", group: "g\\\"x\n", topic: "orders", progress: func() runner.Snapshot {
		return runner.Snapshot{SourceRetries: 3, SinkRetries: 7, DeadLetterRetries: 2, Written: 9007199254740993,
			Skipped: map[string]int64{"filtered": 4, "decode-error": 1}}
	}}
	var out bytes.Buffer
	if err := writeMetrics(&out, []metricJob{job}); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for name, want := range map[string]float64{"replay_source_retries_total": 3, "replay_sink_retries_total": 7, "replay_dead_letter_retries_total": 2, "replay_records_skipped_total": 5} {
		got := 0.0
		for _, m := range fams[name].GetMetric() {
			got += m.GetCounter().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" && l.GetValue() != "g\\\"x\n" {
					t.Errorf("%s: group label %q", name, l.GetValue())
				}
			}
		}
		if got != want {
			t.Errorf("%s = %v, want %v\n%s", name, got, want, out.String())
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(" 9007199254740993\n")) {
		t.Errorf("records written not written as the integer it is:\n%s", out.String())
	}
}
