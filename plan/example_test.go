package plan_test

import (
	"fmt"
	"time"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/registry"
)

func Example() {
	src := `
version: 1
name: orders-fx-fix-2026-11-03
source:
  brokers: ["kafka-1:9092"]
  topic: orders
  partitions: [3, 0]
group: replay.orders-fx-fix
window:
  from: 24h ago
  to: 2026-11-03T12:30:00Z
throttle: {records_per_second: 2000, bytes_per_second: 5MiB}
sink:
  type: postgres
  dsn: ${ORDERS_DSN}
  table: orders_repriced
  key: '{{ .Value.id }}'
`
	now := time.Date(2026, 11, 4, 10, 0, 0, 0, time.UTC)
	p, err := plan.Parse("orders.yaml", []byte(src), plan.LoadOptions{
		Sinks: registry.Catalog(),
		Now:   func() time.Time { return now },
		LookupEnv: func(name string) (string, bool) {
			return "postgres://app:s3cret@db:5432/orders", name == "ORDERS_DSN"
		},
	})
	if err != nil {
		fmt.Println(err) // every problem, one per line: file:line:col: field: message
		return
	}
	fmt.Println("partitions:", p.Source.Partitions)
	fmt.Println("isolation:", p.Source.Isolation)
	fmt.Println("window:", p.Window.From.At(now).Format(time.RFC3339), "->", p.Window.To.At(now).Format(time.RFC3339))
	fmt.Println("bytes/s:", int64(p.Throttle.BytesPerSecond))
	pg := plan.ConfigOf[postgres.Section](&p.Sink) // the type's own fields
	fmt.Println("sink:", p.Sink.Type, plan.RedactDSN(pg.DSN), pg.Table, "on conflict", pg.OnConflict)
	fmt.Println("batch size:", p.Sink.BatchSize)
	// Output:
	// partitions: [0 3]
	// isolation: read_committed
	// window: 2026-11-03T10:00:00Z -> 2026-11-03T12:30:00Z
	// bytes/s: 5242880
	// sink: postgres postgres://app:xxxxx@db:5432/orders orders_repriced on conflict update
	// batch size: 1000
}
