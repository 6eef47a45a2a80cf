package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// The contents corpus produced with kgo and replayed by `replay run` into
// the default PostgreSQL layout reads back (postgres.ReadRecords, the
// documented decoding) as the exact key and value bytes kcat reads from
// the source, and the headers a Kafka client reads; the summary counts
// the rows inserted, and a second run with another group inserts nothing.
func TestReplayKeepsRecordContentsPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
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
	table := testenv.TableName()
	from := corpus[0].Time
	sink := fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 5, copy_threshold: 3, overwrite: true}", dsn, table)
	for i, want := range []string{fmt.Sprintf("%d inserted", len(corpus)), fmt.Sprintf("%d unchanged", len(corpus))} {
		file := writePlan(t, dir, planSpec{name: fmt.Sprint("contents-pg-", i), addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: sink})
		r := replay(t, "run", "--yes", file)
		if r.code != exitOK {
			t.Fatalf("run %d: %s", i, r)
		}
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("run %d: the summary does not say %q:\n%s", i, want, r)
		}
	}
	got, err := postgres.ReadRecords(t.Context(), testenv.PgConn(t, dsn), table)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b record.Record) int { return int(a.Offset - b.Offset) })
	kc := testenv.KcatRecords(t, sb.Addr, "orders", 0)
	src := sb.ReadTopic(t, "orders")
	if len(got) != len(corpus) || len(kc) != len(corpus) || len(src) != len(corpus) {
		t.Fatalf("%d rows, kcat read %d records, kgo %d; want %d", len(got), len(kc), len(src), len(corpus))
	}
	for i, k := range kc {
		want := record.Record{Topic: "orders", Offset: k.Offset, Time: time.UnixMilli(k.Timestamp).UTC(), Key: k.Key, Value: k.Value}
		for _, h := range src[i].Headers {
			want.Headers = append(want.Headers, record.Header{Key: h.Key, Value: h.Value})
		}
		sinktest.CompareContents(t, got[i], want)
	}
}
