package http_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/plan"
	httpsink "github.com/replay-tool/replay/sinks/http"
	"github.com/replay-tool/replay/sinks/registry"
)

const httpPlan = `version: 1
name: orders-to-api
source: {brokers: ["kafka-1:9092"], topic: orders}
group: replay.orders-to-api
window: {from: 2026-11-03T10:00:00Z}
throttle: {records_per_second: 1000}
sink:
  type: http
  url: https://orders.internal/api
`

func parse(t *testing.T, src string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse("plan.yaml", []byte(src), plan.LoadOptions{Sinks: registry.Catalog(),
		Now: func() time.Time { return time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHTTPSinkDefaults(t *testing.T) {
	s := plan.ConfigOf[httpsink.Section](&parse(t, httpPlan).Sink)
	if s.MaxRetries == nil || *s.MaxRetries != httpsink.DefaultMaxRetries || s.MaxRetryWait != httpsink.DefaultMaxRetryWait {
		t.Errorf("max_retries %v, max_retry_wait %v: want the defaults", s.MaxRetries, s.MaxRetryWait)
	}
	// 0 is a choice (never retry), not "unset".
	s = plan.ConfigOf[httpsink.Section](&parse(t, httpPlan+"  max_retries: 0\n  max_retry_wait: 5s\n").Sink)
	if *s.MaxRetries != 0 || time.Duration(s.MaxRetryWait) != 5*time.Second {
		t.Errorf("max_retries %d, max_retry_wait %v: want 0 and 5s as written", *s.MaxRetries, s.MaxRetryWait)
	}
	p := parse(t, strings.Replace(httpPlan, "type: http\n  url: https://orders.internal/api", "type: file\n  path: o.jsonl", 1))
	if _, ok := p.Sink.Config.(*httpsink.Section); ok {
		t.Error("a file sink got the http sink's retry defaults")
	}
}
