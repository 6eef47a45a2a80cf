package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// The contents corpus produced to a broker and replayed to a JSONL file
// reads back, through the documented decoding, as the exact key and value
// bytes kcat reads from the source, and the headers a Kafka client reads.
func TestReplayKeepsRecordContents(t *testing.T) {
	sb := testenv.NewKafka(t)
	sb.CreateTopic(t, "orders", 1, map[string]string{"max.message.bytes": "8388608"})
	corpus := sinktest.Corpus()
	cl := sb.Client(t, kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	for _, r := range corpus {
		kr := &kgo.Record{Topic: "orders", Key: r.Key, Value: r.Value, Timestamp: r.Time}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := cl.ProduceSync(ctx, kr).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce offset %d: %v", r.Offset, err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	from := corpus[0].Time
	file := writePlan(t, dir, planSpec{name: "contents", addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: fileSink(out, 5)})
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	got := sinktest.DecodeLines(t, readFile(t, out))
	kc := testenv.KcatRecords(t, sb.Addr, "orders", 0)
	src := sb.ReadTopic(t, "orders")
	if len(got) != len(corpus) || len(kc) != len(corpus) || len(src) != len(corpus) {
		t.Fatalf("%d lines, kcat read %d records, kgo %d; want %d", len(got), len(kc), len(src), len(corpus))
	}
	for i, k := range kc {
		want := record.Record{Topic: "orders", Offset: k.Offset, Time: time.UnixMilli(k.Timestamp), Key: k.Key, Value: k.Value}
		for _, h := range src[i].Headers {
			want.Headers = append(want.Headers, record.Header{Key: h.Key, Value: h.Value})
		}
		sinktest.CompareContents(t, got[i], want)
		if !bytesSame(k.Value, corpus[i].Value) || !bytesSame(k.Key, corpus[i].Key) {
			t.Errorf("offset %d: kcat reads other bytes than were produced", k.Offset)
		}
	}
}

func bytesSame(a, b []byte) bool { return string(a) == string(b) && (a == nil) == (b == nil) }
