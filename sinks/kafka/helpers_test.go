package kafka_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// Test helpers shared by this package's tests.

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

// writeAll writes each partition of window in batches of up to max records.
func writeAll(t *testing.T, s sinks.Sink, window [][]record.Record, seed uint64, max int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, part := range window {
		for _, b := range sinktest.Batches(rng, part, max) {
			if err := s.Write(t.Context(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// produceRefused answers a ProduceRequest (kfake's ControlKey) with code
// for every partition it names.
func produceRefused(req kmsg.Request, code int16) kmsg.Response {
	r := req.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
