package parquet_test

import (
	"testing"

	"github.com/replay-tool/replay/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.RunWith(t, &harness{maxRows: 7}, sinktest.Features{Durable: sinktest.OnSync, Contents: true})
}

func TestConformanceOneObjectPerPartition(t *testing.T) {
	sinktest.RunWith(t, &harness{maxRows: 1000}, sinktest.Features{Durable: sinktest.OnSync})
}
