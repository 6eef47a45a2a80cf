package http

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// A request body is built in one allocation: its size is estimated with
// the records' headers (without them the buffer grew, doubling, for every
// request of records that carry headers).
func TestBodyOneAllocation(t *testing.T) {
	recs := make([]record.Record, 100)
	keys := make([]string, len(recs))
	for i := range recs {
		recs[i] = record.Record{Topic: "orders", Partition: 1, Offset: int64(i), Time: time.Unix(1700000000, 0),
			Key: []byte("k-" + strconv.Itoa(i)), Value: []byte(`{"id":` + strconv.Itoa(i) + `,"status":"paid","amount":12.5}`),
			Headers: []record.Header{{Key: "trace-id", Value: bytes.Repeat([]byte("a"), 32)}, {Key: "source", Value: []byte("checkout-service")}, {Key: "schema", Value: []byte("v3")}}}
		keys[i] = "orders/1/" + strconv.Itoa(i)
	}
	if n := testing.AllocsPerRun(10, func() { body(recs, keys, "") }); n != 1 {
		t.Fatalf("body: %v allocations, want 1", n)
	}
}
