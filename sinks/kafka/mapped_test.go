package kafka_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/pipeline"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/registry"
)

// headerNames returns the keys of m's headers, in order.
func headerNames(m *kgo.Record) []string {
	var out []string
	for _, h := range m.Headers {
		out = append(out, h.Key)
	}
	return out
}

// Under a mapping the message carries the mapped value and says so
// (replay-mapped: 1, before replay-key); a record the mapping leaves
// alone (a tombstone) keeps its bytes and has no such header, as every
// record has without a mapping.
func TestKafkaMappedValue(t *testing.T) {
	addr := newKafkaCluster(t).ListenAddrs()[0]
	topic := createTopic(t, addr, 1, nil)
	src := "version: 1\nname: m\nsource: {brokers: [\"k:9092\"], topic: orders}\ngroup: replay.m\nwindow: {from: 2026-11-01T00:00:00Z, to: 2026-11-02T00:00:00Z}\n" +
		"sink: {type: kafka, brokers: [\"" + addr + "\"], topic: " + topic + "}\nmapping:\n  - set: {amount_eur: 'value.amount * 0.92'}\n  - drop: [debug]\n"
	p, err := plan.Parse("plan.yaml", []byte(src), plan.LoadOptions{Sinks: registry.Catalog()})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pipeline.New(p, sinks.KeysAll)
	if err != nil {
		t.Fatal(err)
	}
	run := pl.Partition()
	ts := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	in := `{"id":1, "amount":19.99, "debug":"x"}`
	mapped := record.Record{Topic: "orders", Offset: 1, Time: ts, Key: []byte("k"), Value: []byte(in), Headers: []record.Header{{Key: "trace", Value: []byte("t")}}}
	tomb := record.Record{Topic: "orders", Offset: 2, Time: ts, Key: []byte("k")}
	for _, r := range []*record.Record{&mapped, &tomb} {
		if ok, err := run.Process(r); !ok || err != nil {
			t.Fatalf("Process: %v, %v", ok, err)
		}
	}
	plain := record.Record{Topic: "orders", Offset: 3, Time: ts, Key: []byte("k"), Value: []byte(in)}
	mustWrite(t, newKafka(t, kafkasink.Config{Brokers: []string{addr}, Topic: topic}), mapped, tomb, plain)
	msgs := readTopic(t, addr, topic, nil)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	if got, want := string(msgs[0].Value), `{"id":1,"amount":19.99,"amount_eur":18.3908}`; got != want {
		t.Errorf("mapped message value %s, want %s", got, want)
	}
	wantHeaders := []string{"trace", kafkasink.HeaderSourceTopic, kafkasink.HeaderSourcePartition, kafkasink.HeaderSourceOffset,
		kafkasink.HeaderSourceTimestamp, kafkasink.HeaderPlan, kafkasink.HeaderMapped, kafkasink.HeaderKey}
	if got := headerNames(msgs[0]); !slices.Equal(got, wantHeaders) {
		t.Errorf("mapped message headers %v, want %v", got, wantHeaders)
	}
	if h := msgs[0].Headers[6]; string(h.Value) != "1" {
		t.Errorf("%s = %q, want 1", h.Key, h.Value)
	}
	if msgs[1].Value != nil || slices.Contains(headerNames(msgs[1]), kafkasink.HeaderMapped) {
		t.Errorf("tombstone: value %q, headers %v; want null, no %s", msgs[1].Value, headerNames(msgs[1]), kafkasink.HeaderMapped)
	}
	if string(msgs[2].Value) != in || slices.Contains(headerNames(msgs[2]), kafkasink.HeaderMapped) {
		t.Errorf("unmapped record: value %q, headers %v; want its bytes, no %s", msgs[2].Value, headerNames(msgs[2]), kafkasink.HeaderMapped)
	}
}
