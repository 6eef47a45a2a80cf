package testenv_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
)

// A record produced with key, value, headers and timestamp reads back the
// same, from franz-go and from kcat (bytes included: a null key, a value
// with a newline and a NUL), and a time window reads the records inside it.
func TestKafkaRoundTrip(t *testing.T) {
	k := testenv.NewKafka(t, testenv.Partitions(2), testenv.Topics("events"))
	ts := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte(fmt.Sprintf("v%d\n\x00", i)), Timestamp: ts.Add(time.Duration(i) * time.Minute),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}})
	}
	recs[5].Key = nil
	k.Produce(t, "events", recs...)

	got := k.ReadTopic(t, "events")
	if len(got) != len(recs) {
		t.Fatalf("read %d records, want %d", len(got), len(recs))
	}
	for _, r := range got {
		i := int(r.Offset)*2 + int(r.Partition)
		want := recs[i]
		if !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) || !r.Timestamp.Equal(want.Timestamp) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "h" || r.Headers[0].Value[0] != byte(i) {
			t.Errorf("%d/%d: read %+v, want %+v", r.Partition, r.Offset, r, want)
		}
	}

	kc := testenv.KcatRecords(t, k.Addr, "events", -1)
	if len(kc) != len(recs) {
		t.Fatalf("kcat read %d records, want %d", len(kc), len(recs))
	}
	for _, r := range kc {
		want := recs[int(r.Offset)*2+int(r.Partition)]
		if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) || !bytes.Equal(r.Value, want.Value) ||
			r.Timestamp != want.Timestamp.UnixMilli() {
			t.Errorf("kcat %d/%d: key %q value %q ts %d, want %q %q %d", r.Partition, r.Offset, r.Key, r.Value, r.Timestamp,
				want.Key, want.Value, want.Timestamp.UnixMilli())
		}
	}

	// [ts+1m, ts+4m) holds records 1, 2, 3: 1/0, 0/1, 1/1.
	coords := testenv.KcatCoords(t, k.Addr, "events", -1, ts.Add(time.Minute), ts.Add(4*time.Minute))
	slices.Sort(coords)
	if want := []string{"0/1", "1/0", "1/1"}; !slices.Equal(coords, want) {
		t.Errorf("kcat window: %v, want %v", coords, want)
	}
	if p1 := testenv.KcatCoords(t, k.Addr, "events", 1, ts.Add(time.Minute), ts.Add(4*time.Minute)); !slices.Equal(p1, []string{"1/0", "1/1"}) {
		t.Errorf("kcat window of partition 1: %v", p1)
	}
}

// CreateTopic makes a topic with its partitions; Committed reads back a
// group's commit with its metadata.
func TestKafkaTopicAndCommits(t *testing.T) {
	k := testenv.NewKafka(t)
	k.CreateTopic(t, "t", 3, map[string]string{"cleanup.policy": "compact"})
	// A compacted topic takes keyed records only (Apache Kafka refuses a
	// null key with INVALID_RECORD).
	k.Produce(t, "t", &kgo.Record{Partition: 2, Key: []byte("k"), Value: []byte("x")})
	if got := k.ReadTopic(t, "t"); len(got) != 1 || got[0].Partition != 2 {
		t.Fatalf("read %v", got)
	}
	if c := k.Committed(t, "g", "t"); len(c) != 0 {
		t.Fatalf("a group that never committed: %v", c)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "t", Partition: 2, At: 1, LeaderEpoch: -1, Metadata: "meta"})
	if resp, err := k.Admin(t).CommitOffsets(t.Context(), "g", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if c := k.Committed(t, "g", "t"); len(c) != 1 || c[2].At != 1 || c[2].Metadata != "meta" {
		t.Fatalf("committed %v, want partition 2 at 1 with its metadata", c)
	}
}

// Two tests' schemas are separate: the same table name in each holds its
// own rows, and the schema is gone after the test.
func TestPostgresSchemaIsolation(t *testing.T) {
	var dsns []string
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			dsns = append(dsns, dsn)
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(t.Context(), fmt.Sprintf("CREATE TABLE same (n int); INSERT INTO same VALUES (%d)", i)); err != nil {
				t.Fatal(err)
			}
			var n, rows int
			if err := conn.QueryRow(t.Context(), "SELECT max(n), count(*) FROM same").Scan(&n, &rows); err != nil || n != i || rows != 1 {
				t.Fatalf("table same: max %d over %d rows (%v), want only %d", n, rows, err, i)
			}
		})
	}
	if len(dsns) != 2 || dsns[0] == dsns[1] {
		t.Fatalf("DSNs %v: want two different", dsns)
	}
	conn, err := pgx.Connect(t.Context(), testenv.DefaultPostgresDSN)
	if err != nil {
		t.Skip(err)
	}
	defer conn.Close(context.Background())
	var left int
	err = conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE $1 LIKE '%search_path=' || nspname || '%' OR $2 LIKE '%search_path=' || nspname || '%'",
		dsns[0], dsns[1]).Scan(&left)
	if err != nil || left != 0 {
		t.Fatalf("%d schemas left after the tests (%v)", left, err)
	}
}

// fakeTB records a failure instead of stopping the goroutine.
type fakeTB struct{ failed []string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}

func TestEventually(t *testing.T) {
	var f fakeTB
	n := 0
	if !testenv.Eventually(&f, time.Second, time.Millisecond, func() bool { n++; return n == 3 }) || len(f.failed) != 0 || n != 3 {
		t.Fatalf("a condition true on the third call: %d calls, failures %v", n, f.failed)
	}
	start := time.Now()
	if testenv.Eventually(&f, 50*time.Millisecond, 10*time.Millisecond, func() bool { return false }, "file %s to appear", "x") {
		t.Fatal("a condition never true reported true")
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want about 50ms", d)
	}
	if len(f.failed) != 1 || !strings.Contains(f.failed[0], "file x to appear") {
		t.Errorf("failures %q: want one naming what was awaited", f.failed)
	}
	calls := 0
	testenv.Eventually(&f, 10*time.Millisecond, time.Millisecond, func() bool { calls++; return false },
		func() string { return fmt.Sprintf("%d calls", calls) })
	if len(f.failed) != 2 || !strings.Contains(f.failed[1], fmt.Sprintf("%d calls", calls)) {
		t.Errorf("failures %q: want the message made at the time out", f.failed)
	}
}

func TestWaitFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if err := testenv.WaitFor(ctx, time.Millisecond, func() bool { return false }); err == nil {
		t.Fatal("want the context's error")
	}
	if err := testenv.WaitFor(t.Context(), time.Millisecond, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
}

// Goroutines counts the goroutines blocked where the parts say, and only
// those.
func TestGoroutines(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	for range 3 {
		go parkedForGoroutinesTest(block)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
		return testenv.Goroutines("[chan receive", "testenv_test.parkedForGoroutinesTest(") == 3
	}, "three goroutines parked in parkedForGoroutinesTest")
	if n := testenv.Goroutines("[select", "testenv_test.parkedForGoroutinesTest("); n != 0 {
		t.Errorf("%d goroutines in a select, want 0", n)
	}
}

func parkedForGoroutinesTest(block chan struct{}) { <-block }
