package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	kafkasink "github.com/replay-tool/replay/sinks/kafka"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// The contents corpus produced to a broker and replayed to a JSONL file
// reads back, through the documented decoding, as the exact key and value
// bytes kcat reads from the source, and the headers a Kafka client reads.
func TestReplayKeepsRecordContents(t *testing.T) {
	sb, corpus := seedCorpus(t, 1)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	from := corpus[0].Time
	file := writePlan(t, dir, planSpec{name: "contents", addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: fileSink(out, 5)})
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	compareWithSource(t, sb, corpus, sinktest.DecodeLines(t, readFile(t, out)))
}

// seedCorpus produces sinktest.Corpus with kgo, in order, to a new topic
// orders with the given partitions (record i to partition i mod
// partitions), on a new broker.
func seedCorpus(t *testing.T, partitions int32) (*testenv.Kafka, []record.Record) {
	t.Helper()
	sb := testenv.NewKafka(t)
	sb.CreateTopic(t, "orders", partitions, map[string]string{"max.message.bytes": "8388608"})
	corpus := sinktest.Corpus()
	cl := sb.Client(t, kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, r := range corpus {
		kr := &kgo.Record{Topic: "orders", Partition: int32(i) % partitions, Key: r.Key, Value: r.Value, Timestamp: r.Time}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := cl.ProduceSync(ctx, kr).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce corpus record %d: %v", i, err)
		}
	}
	return sb, corpus
}

// compareWithSource checks got, what a sink holds of the one-partition
// corpus topic read back in offset order, against kcat's view of the
// source (key and value bytes, null apart from empty, timestamps) and
// kgo's (headers), and that kcat reads the bytes that were produced.
func compareWithSource(t *testing.T, sb *testenv.Kafka, corpus, got []record.Record) {
	t.Helper()
	kc := testenv.KcatRecords(t, sb.Addr, "orders", 0)
	src := sb.ReadTopic(t, "orders")
	if len(got) != len(corpus) || len(kc) != len(corpus) || len(src) != len(corpus) {
		t.Fatalf("the sink holds %d records, kcat read %d, kgo %d; want %d", len(got), len(kc), len(src), len(corpus))
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

// The contents corpus, spread over three source partitions, replayed to a
// Kafka topic: kcat reads from the target the same key and value bytes
// (null apart from empty), timestamps (CreateTime) as from the source, and
// kgo the same headers (order, repeats, binary and null values) followed
// by the provenance headers; each message sits in the partition the Java
// producer's murmur2 gives its key (a null key: its source partition
// modulo the target's), or with keep_partition in its source partition.
func TestReplayToKafkaKeepsRecordContents(t *testing.T) {
	sb, corpus := seedCorpus(t, 3)
	big := map[string]string{"max.message.bytes": "8388608"}
	src := map[string]*kgo.Record{} // by partition@offset
	for _, r := range sb.ReadTopic(t, "orders") {
		src[fmt.Sprintf("%d@%d", r.Partition, r.Offset)] = r
	}
	srcKcat := map[string]testenv.KcatRecord{}
	for _, k := range testenv.KcatRecords(t, sb.Addr, "orders", -1) {
		srcKcat[fmt.Sprintf("%d@%d", k.Partition, k.Offset)] = k
	}
	if len(src) != len(corpus) || len(srcKcat) != len(corpus) {
		t.Fatalf("source: kgo reads %d records, kcat %d; want %d", len(src), len(srcKcat), len(corpus))
	}
	java := kgo.StickyKeyPartitioner(nil).ForTopic("copy")
	for _, tc := range []struct {
		name string
		keep bool
	}{{"hashed", false}, {"keep_partition", true}} {
		t.Run(tc.name, func(t *testing.T) {
			target := "copy-" + tc.name
			sb.CreateTopic(t, target, 3, big)
			dir := t.TempDir()
			from := corpus[0].Time
			file := writePlan(t, dir, planSpec{name: "contents-" + strings.ReplaceAll(tc.name, "_", "-"), addr: sb.Addr, from: from, to: from.Add(time.Minute),
				sink: fmt.Sprintf("{type: kafka, brokers: [%q], topic: %s, keep_partition: %v, batch_size: 4}", sb.Addr, target, tc.keep)})
			if r := replay(t, "run", "--yes", file); r.code != exitOK {
				t.Fatalf("run: %s", r)
			}
			msgs := sb.ReadTopic(t, target)
			kc := testenv.KcatRecords(t, sb.Addr, target, -1)
			if len(msgs) != len(corpus) || len(kc) != len(corpus) {
				t.Fatalf("target: kgo reads %d messages, kcat %d; want %d", len(msgs), len(kc), len(corpus))
			}
			byCoord := map[string]*kgo.Record{}
			for _, m := range msgs {
				byCoord[fmt.Sprintf("%d@%d", m.Partition, m.Offset)] = m
			}
			for _, k := range kc {
				m := byCoord[fmt.Sprintf("%d@%d", k.Partition, k.Offset)]
				if m == nil {
					t.Fatalf("kcat reads %d@%d, kgo does not", k.Partition, k.Offset)
				}
				hs := m.Headers
				if len(hs) < 6 || hs[len(hs)-6].Key != kafkasink.HeaderSourceTopic || hs[len(hs)-1].Key != kafkasink.HeaderKey {
					t.Fatalf("target %d@%d: headers %v, want the provenance headers last", k.Partition, k.Offset, hs)
				}
				coord := string(hs[len(hs)-5].Value) + "@" + string(hs[len(hs)-4].Value)
				s, sk := src[coord], srcKcat[coord]
				if s == nil {
					t.Fatalf("target %d@%d: provenance %s names no source record", k.Partition, k.Offset, coord)
				}
				if want := "orders/" + strings.Replace(coord, "@", "/", 1); string(hs[len(hs)-1].Value) != want {
					t.Errorf("target %d@%d: %s %q, want %q", k.Partition, k.Offset, kafkasink.HeaderKey, hs[len(hs)-1].Value, want)
				}
				if !bytesSame(k.Key, sk.Key) || !bytesSame(k.Value, sk.Value) || k.Timestamp != sk.Timestamp {
					t.Errorf("source %s: kcat reads key %q (null %v), %d value bytes (null %v) at %d from the target; %q (null %v), %d (null %v) at %d from the source",
						coord, k.Key, k.Key == nil, len(k.Value), k.Value == nil, k.Timestamp, sk.Key, sk.Key == nil, len(sk.Value), sk.Value == nil, sk.Timestamp)
				}
				if m.Attrs.TimestampType() != 0 {
					t.Errorf("target %d@%d: timestamp type %d, want CreateTime", k.Partition, k.Offset, m.Attrs.TimestampType())
				}
				own := hs[:len(hs)-6]
				if len(own) != len(s.Headers) {
					t.Errorf("source %s: %d headers in the target, want %d", coord, len(own), len(s.Headers))
				} else {
					for j, h := range s.Headers {
						if own[j].Key != h.Key || !bytesSame(own[j].Value, h.Value) {
							t.Errorf("source %s header %d: %q=%q (null %v), want %q=%q (null %v)", coord, j, own[j].Key, own[j].Value, own[j].Value == nil, h.Key, h.Value, h.Value == nil)
						}
					}
				}
				want := s.Partition
				switch {
				case tc.keep:
				case s.Key == nil:
					want = s.Partition % 3
				default:
					want = int32(java.Partition(&kgo.Record{Key: s.Key}, 3))
				}
				if k.Partition != want {
					t.Errorf("source %s (key %q, null %v): target partition %d, want %d", coord, s.Key, s.Key == nil, k.Partition, want)
				}
			}
		})
	}
}

// A topic whose batches the broker stamped with its append time
// (LOG_APPEND_TIME, KIP-32) replays with the time Kafka gives such a
// record, its batch's MaxTimestamp, not the producer's first timestamp plus
// the record's delta, and says so in timestamp_type; CreateTime batches
// keep their records' own times. kcat (librdkafka) and kgo read the same
// times and types from the source. The broker serves the batches as Kafka
// stores them (testenv.ServeBatches: kfake's own stamping leaves a stale
// CRC); metadata, offsets and commits are kfake's, of the same offsets.
func TestReplayLogAppendTime(t *testing.T) {
	sb := testenv.NewKafka(t)
	sb.CreateTopic(t, "orders", 1, nil)
	created := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	appended := created.Add(3 * time.Minute)
	var all []*kgo.Record
	batch := func(n int, key string) []*kgo.Record {
		var recs []*kgo.Record
		for i := range n { // the producer's times a second apart
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", key, i)), Value: []byte(`{"i":1}`), Timestamp: created.Add(time.Duration(i) * time.Second)})
		}
		all = append(all, recs...)
		return recs
	}
	const logAppendTime = 0x08
	a, c, b := batch(3, "a"), batch(2, "c"), batch(2, "b")
	if sb.Real() {
		// The broker stamps the append time itself: the topic's
		// message.timestamp.type switches between the batches.
		setType := func(typ string) {
			adm := sb.Admin(t)
			if _, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "message.timestamp.type", Value: &typ}}, "orders"); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, func() bool {
				rcs, err := adm.DescribeTopicConfigs(t.Context(), "orders")
				if err != nil {
					return false
				}
				rc, err := rcs.On("orders", nil)
				if err != nil {
					return false
				}
				for _, c := range rc.Configs {
					if c.Key == "message.timestamp.type" && c.MaybeValue() == typ {
						return true
					}
				}
				return false
			}, "message.timestamp.type %s on orders", typ)
		}
		setType("LogAppendTime")
		sb.Produce(t, "orders", a...)
		setType("CreateTime")
		sb.Produce(t, "orders", c...)
		setType("LogAppendTime")
		sb.Produce(t, "orders", b...)
		// The window ends a second ago, in whole seconds (RFC 3339).
		// Kept: the broker stamped the append times with its own clock,
		// and a window may not end in the future; the wall clock must
		// pass them.
		time.Sleep(2100 * time.Millisecond)
	} else {
		sb.Produce(t, "orders", all...)
		sb.ServeBatches(t, "orders", 0, 7,
			testenv.EncodeBatch(0, logAppendTime, appended, a...),
			testenv.EncodeBatch(3, 0, c[1].Timestamp, c...),
			testenv.EncodeBatch(5, logAppendTime, appended.Add(time.Second), b...))
	}

	src := sb.ReadTopic(t, "orders")
	kc := testenv.KcatRecords(t, sb.Addr, "orders", 0)
	if len(src) != 7 || len(kc) != 7 {
		t.Fatalf("kgo reads %d records, kcat %d; want 7", len(src), len(kc))
	}
	if src[1].Attrs.TimestampType() != 1 || (!sb.Real() && !src[1].Timestamp.Equal(appended)) || kc[1].Timestamp != src[1].Timestamp.UnixMilli() || src[1].Timestamp.Equal(a[1].Timestamp) {
		t.Fatalf("kgo reads record 1 at %v (type %d), kcat at %d: want the append time, not the producer's %v", src[1].Timestamp, src[1].Attrs.TimestampType(), kc[1].Timestamp, a[1].Timestamp)
	}
	if src[3].Attrs.TimestampType() != 0 || !src[3].Timestamp.Equal(c[0].Timestamp) {
		t.Fatalf("kgo reads record 3 at %v (type %d): want the producer's CreateTime %v", src[3].Timestamp, src[3].Attrs.TimestampType(), c[0].Timestamp)
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := writePlan(t, dir, planSpec{name: "append-time", addr: sb.Addr, from: created.Add(-time.Hour), to: time.Now().Add(-time.Second), sink: fileSink(out, 2)})
	if r := replay(t, "run", "--yes", file); r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(string(readFile(t, out))), "\n")
	got := sinktest.DecodeLines(t, readFile(t, out))
	if len(got) != 7 {
		t.Fatalf("the file holds %d records, want 7", len(got))
	}
	for i, g := range got {
		wantType, wantName := record.CreateTime, "CreateTime"
		if src[i].Attrs.TimestampType() == 1 {
			wantType, wantName = record.LogAppendTime, "LogAppendTime"
		}
		if g.Offset != kc[i].Offset || g.Time.UnixMilli() != kc[i].Timestamp || !g.Time.Equal(src[i].Timestamp) || g.TimestampType != wantType {
			t.Errorf("offset %d: replay wrote %v (%v); kcat reads %d, kgo %v (%s)", g.Offset, g.Time, g.TimestampType, kc[i].Timestamp, src[i].Timestamp, wantName)
		}
		if !strings.Contains(lines[i], `"timestamp_type":"`+wantName+`"`) {
			t.Errorf("line %d lacks timestamp_type %s: %s", i, wantName, lines[i])
		}
	}
}
