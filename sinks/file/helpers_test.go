package file_test

import (
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// Helpers the file sink's tests share with the tests that moved to the
// driver packages.

func rec(partition int32, offset int64, key, value string) record.Record {
	r := record.Record{Topic: "orders", Partition: partition, Offset: offset,
		Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(offset) * time.Millisecond)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func mustWrite(t *testing.T, s sinks.Sink, batch ...record.Record) {
	t.Helper()
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}
