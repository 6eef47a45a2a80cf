package source

// Reader tests on layouts kfake cannot produce, built at the protocol
// level: kfake's Fetch handler is replaced by a scripted log that answers
// with hand-encoded record batches the way a broker does (the first batch
// whose last offset is >= the fetch offset, then whole batches up to the
// requested size). The reader still talks the real protocol over TCP and
// decodes the record batches as the reader does for any broker.
//
// kfake cannot produce these because its log cleaner rewrites a batch's
// lastOffsetDelta to its last surviving record (Kafka keeps the header, so
// a batch can end in offsets without records, or hold none at all), its
// produce path rejects a lastOffsetDelta that does not match the records,
// and it returns oversized batches (KIP-74) like every broker since 0.10.1.

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/sandbox"
	"github.com/replay-tool/replay/runner/source/wire"
)

// scriptedBatch is one record batch of a scripted log.
type scriptedBatch struct {
	base    int64
	last    int64   // last offset of the batch (header), >= the last record
	offsets []int64 // offsets that hold a record
	value   int     // value size of each record
	attrs   int16   // batch attributes
	// producer is the batch's producer id (-1 when 0: none); a control
	// batch (attrs 0x30) holds markers, ABORT unless commit.
	producer int64
	commit   bool
	// raw, when set, is the batch's encoding, served as is (a message set
	// of magic 0 or 1).
	raw []byte
}

// scriptedTxn is an aborted transaction of a scripted log, named in the
// responses of fetches at or below its last offset (its marker), as a
// broker names the aborted transactions that overlap the fetched range.
type scriptedTxn struct{ producer, first, last int64 }

// scriptedLog serves Fetch for topic orders, partition 0.
type scriptedLog struct {
	batches  []scriptedBatch
	hwm      int64
	noKIP74  bool // truncate a first batch larger than the request (pre-0.10.1)
	fetches  atomic.Int64
	encoded  [][]byte
	logStart int64
	aborted  []scriptedTxn
	// firstFetchBatches bounds the batches of the first response (0: no
	// bound).
	firstFetchBatches int
}

func (l *scriptedLog) install(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	for _, b := range l.batches {
		if b.raw != nil {
			l.encoded = append(l.encoded, b.raw)
			continue
		}
		l.encoded = append(l.encoded, encodeBatch(b))
	}
	sb.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		sb.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				l.fetches.Add(1)
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rp.Partition, l.hwm, l.hwm, l.logStart
				if rp.FetchOffset < l.logStart || rp.FetchOffset > l.hwm {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				} else {
					sp.RecordBatches = l.serve(rp.FetchOffset, int(min(rp.PartitionMaxBytes, req.MaxBytes)))
					for _, a := range l.aborted {
						if rp.FetchOffset <= a.last {
							at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
							at.ProducerID, at.FirstOffset = a.producer, a.first
							sp.AbortedTransactions = append(sp.AbortedTransactions, at)
						}
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// serve returns the batches a broker returns for a fetch at offset.
func (l *scriptedLog) serve(offset int64, maxBytes int) []byte {
	var out []byte
	n := 0
	first := l.fetches.Load() == 1
	for i, b := range l.batches {
		if first && l.firstFetchBatches > 0 && n == l.firstFetchBatches {
			break
		}
		if b.last < offset {
			continue
		}
		enc := l.encoded[i]
		if len(out)+len(enc) > maxBytes {
			if len(out) == 0 && l.noKIP74 {
				return enc[:maxBytes] // a partial batch, which clients drop
			}
			if len(out) > 0 {
				break
			}
		}
		out = append(out, enc...)
		n++
	}
	return out
}

// encodeBatch encodes a v2 record batch whose header says [base, last]
// and that holds records at offsets only.
func encodeBatch(b scriptedBatch) []byte {
	var raw []byte
	for _, off := range b.offsets {
		r := kmsg.Record{TimestampDelta64: off - b.base, OffsetDelta: int32(off - b.base), Value: []byte(strings.Repeat("v", b.value))}
		if b.attrs&0x20 != 0 { // a marker: key version 0, type 0 (ABORT) or 1 (COMMIT)
			r.Key, r.Value = []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0}
			if b.commit {
				r.Key[3] = 1
			}
		}
		raw = testenv.AppendRecord(raw, r)
	}
	first := t0.UnixMilli()
	return testenv.SealBatch(kmsg.RecordBatch{FirstOffset: b.base, PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(b.last - b.base),
		Attributes: b.attrs, FirstTimestamp: first, MaxTimestamp: first + b.last - b.base, ProducerID: cmp.Or(b.producer, -1), ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(b.offsets)), Records: raw})
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// readScripted reads [start, end) of the scripted log with a partition
// reader and returns the offsets delivered.
func readScripted(t *testing.T, l *scriptedLog, start, end int64, tune func(*Reader)) ([]int64, *Reader, error) {
	t.Helper()
	recs, r, err := readScriptedRecords(t, l, start, end, tune)
	var offs []int64
	for _, rec := range recs {
		offs = append(offs, rec.Offset)
	}
	return offs, r, err
}

// readScriptedRecords reads [start, end) of the scripted log with a
// partition reader and returns the records delivered.
func readScriptedRecords(t *testing.T, l *scriptedLog, start, end int64, tune func(*Reader)) ([]record.Record, *Reader, error) {
	t.Helper()
	sb, err := sandbox.Start(0, 1, "orders")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	l.install(t, sb)
	c, err := Connect(context.Background(), plan.Source{Brokers: []string{sb.Addr}, Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := c.NewReader(ReaderConfig{Topic: "orders", Partition: 0, Isolation: plan.ReadUncommitted, Start: start, End: end})
	if tune != nil {
		tune(r)
	}
	var recs []record.Record
	for !r.Done() {
		if recs, err = r.Fetch(ctx, recs); err != nil {
			break
		}
	}
	return recs, r, err
}

// A batch whose last records were compacted away keeps its header's last
// offset (Kafka's cleaner preserves it); kafka-go does not expose it, so
// the reader finds the batch's end by probing. Regression: a range ending
// in such a tail made no progress until the watchdog failed the partition.
func TestReaderCompactedBatchTails(t *testing.T) {
	big := 100 << 10 // larger than the first fetch (64 KiB)
	tests := []struct {
		name       string
		batches    []scriptedBatch
		hwm        int64
		start, end int64
		want       []int64
	}{
		{"tail-at-end-of-log", []scriptedBatch{
			{base: 0, last: 4, offsets: span(0, 5)},
			{base: 5, last: 9, offsets: []int64{5, 6}},
		}, 10, 0, 10, []int64{0, 1, 2, 3, 4, 5, 6}},
		{"tail-then-batch-too-big-for-the-fetch", []scriptedBatch{
			{base: 0, last: 4, offsets: span(0, 5)},
			{base: 5, last: 9, offsets: []int64{5, 6}},
			{base: 10, last: 10, offsets: []int64{10}, value: big},
			{base: 11, last: 11, offsets: []int64{11}},
		}, 12, 0, 12, []int64{0, 1, 2, 3, 4, 5, 6, 10, 11}},
		{"empty-batch-in-the-middle", []scriptedBatch{
			{base: 0, last: 4, offsets: span(0, 5)},
			{base: 5, last: 7},
			{base: 8, last: 9, offsets: []int64{8, 9}},
		}, 10, 0, 10, []int64{0, 1, 2, 3, 4, 8, 9}},
		{"empty-batch-at-end-of-log", []scriptedBatch{
			{base: 0, last: 4, offsets: span(0, 5)},
			{base: 5, last: 9},
		}, 10, 2, 10, []int64{2, 3, 4}},
		{"range-ends-inside-the-tail", []scriptedBatch{
			{base: 0, last: 99, offsets: span(0, 10)},
			{base: 100, last: 100, offsets: []int64{100}},
		}, 101, 3, 50, []int64{3, 4, 5, 6, 7, 8, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &scriptedLog{batches: tc.batches, hwm: tc.hwm}
			got, r, err := readScripted(t, l, tc.start, tc.end, nil)
			if err != nil {
				t.Fatalf("read: %v (after %d fetches)", err, l.fetches.Load())
			}
			if !equalInts(got, tc.want) || r.next != tc.end {
				t.Fatalf("delivered %v, next %d; want %v, next %d", got, r.next, tc.want, tc.end)
			}
			if n := l.fetches.Load(); n > 12 {
				t.Fatalf("%d fetches: the reader spins", n)
			}
		})
	}
}

// A broker that does not return a batch larger than the request (before
// KIP-74) answers with a partial batch, which kafka-go drops: the reader
// sees nothing although data lies ahead. It grows the fetch size instead
// of spinning, up to its limit; beyond it the partition fails with an
// error that says why.
func TestReaderGrowsFetchSizeForOversizedBatch(t *testing.T) {
	log := func() *scriptedLog {
		return &scriptedLog{noKIP74: true, hwm: 7, batches: []scriptedBatch{
			{base: 0, last: 4, offsets: span(0, 5)},
			{base: 5, last: 5, offsets: []int64{5}, value: 200 << 10},
			{base: 6, last: 6, offsets: []int64{6}},
		}}
	}
	t.Run("below-the-limit", func(t *testing.T) {
		l := log()
		got, _, err := readScripted(t, l, 0, 7, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !equalInts(got, span(0, 7)) {
			t.Fatalf("delivered %v", got)
		}
		if n := l.fetches.Load(); n > 6 {
			t.Fatalf("%d fetches for 3 batches: 64 KiB -> 256 KiB takes 2 growths", n)
		}
	})
	t.Run("above-the-limit", func(t *testing.T) {
		l := log()
		got, _, err := readScripted(t, l, 0, 7, func(r *Reader) { r.growLimit = 128 << 10 })
		var pe *PartitionError
		if !errors.As(err, &pe) || pe.Offset != 5 || !strings.Contains(err.Error(), "larger than replay's fetch limit of 131072 bytes") {
			t.Fatalf("want a PartitionError at offset 5 naming the fetch limit, got %v", err)
		}
		if !equalInts(got, span(0, 5)) {
			t.Fatalf("delivered %v before failing, want 0-4", got)
		}
	})
}

// OFFSET_OUT_OF_RANGE below the log start at the reader's position: a
// *DataLossError naming the lost offsets, or with allow_data_loss a jump to
// the log start recorded as a gap.
func TestReaderLogStartPassesReader(t *testing.T) {
	batches := []scriptedBatch{{base: 0, last: 19, offsets: span(0, 20)}}
	t.Run("fails", func(t *testing.T) {
		l := &scriptedLog{batches: batches, hwm: 20, logStart: 8}
		_, r, err := readScripted(t, l, 3, 20, nil)
		var de *DataLossError
		if !errors.As(err, &de) || de.Lost != (Gap{From: 3, To: 8}) || de.LogStart != 8 {
			t.Fatalf("want a DataLossError for [3, 8), got %v", err)
		}
		if len(r.stats.Lost) != 1 || r.next != 3 {
			t.Fatalf("reader at %d with gaps %v", r.next, r.stats.Lost)
		}
	})
	t.Run("allow-data-loss", func(t *testing.T) {
		l := &scriptedLog{batches: batches, hwm: 20, logStart: 8}
		got, r, err := readScripted(t, l, 3, 20, func(r *Reader) { r.allowLoss = true })
		if err != nil {
			t.Fatal(err)
		}
		if !equalInts(got, span(8, 20)) || len(r.stats.Lost) != 1 || r.stats.Lost[0] != (Gap{From: 3, To: 8}) {
			t.Fatalf("delivered %v with gaps %v", got, r.stats.Lost)
		}
	})
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// t0 is the timestamp of the scripted records' batches.
var t0 = time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)

// Every record of a LOG_APPEND_TIME batch (timestampType bit set) carries
// the batch's MaxTimestamp, the broker's append time, as Kafka gives it
// (KIP-32), whatever its own timestamp delta says; a CreateTime batch's
// records keep first timestamp plus delta. Compressed batches too: the
// batch header is not compressed.
func TestReaderStampsLogAppendTime(t *testing.T) {
	l := &scriptedLog{batches: []scriptedBatch{
		{base: 0, last: 2, offsets: span(0, 3), value: 10, attrs: wire.AttrLogAppendTime},
		{base: 3, last: 5, offsets: span(3, 6), value: 10},
		{base: 6, last: 9, offsets: []int64{6, 9}, value: 10, attrs: wire.AttrLogAppendTime},
	}, hwm: 10}
	recs, _, err := readScriptedRecords(t, l, 0, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	first := t0.UnixMilli()
	for _, rec := range recs {
		want, wantType := first+rec.Offset-3, record.CreateTime // scripted deltas: offset - base
		switch {
		case rec.Offset < 3:
			want, wantType = first+2, record.LogAppendTime // MaxTimestamp: first + last - base
		case rec.Offset >= 6:
			want, wantType = first+3, record.LogAppendTime
		}
		if rec.Time.UnixMilli() != want || rec.TimestampType != wantType {
			t.Errorf("offset %d: %d (%v), want %d (%v)", rec.Offset, rec.Time.UnixMilli(), rec.TimestampType, want, wantType)
		}
	}
}

// Under read_committed, an aborted transaction whose data a fetch read
// and whose ABORT marker opens the next response (which names the
// transaction again: its range reaches the fetch offset) ends at that
// marker: the producer's next, committed, transaction in the same
// response is delivered, not dropped as aborted.
func TestReaderAbortMarkerOpensResponse(t *testing.T) {
	const p = 7
	l := &scriptedLog{batches: []scriptedBatch{
		{base: 0, last: 2, offsets: span(0, 3), value: 10, attrs: 0x10, producer: p},    // aborted data
		{base: 3, last: 3, offsets: []int64{3}, attrs: 0x30, producer: p},               // ABORT
		{base: 4, last: 6, offsets: span(4, 7), value: 10, attrs: 0x10, producer: p},    // committed data
		{base: 7, last: 7, offsets: []int64{7}, attrs: 0x30, producer: p, commit: true}, // COMMIT
	}, hwm: 8, aborted: []scriptedTxn{{producer: p, first: 0, last: 3}}, firstFetchBatches: 1}
	recs, r, err := readScriptedRecords(t, l, 0, 8, func(r *Reader) { r.isolation = 1 })
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, rec := range recs {
		offs = append(offs, rec.Offset)
	}
	if !slices.Equal(offs, []int64{4, 5, 6}) {
		t.Errorf("read_committed delivered %v, want the committed transaction's [4 5 6]", offs)
	}
	if st := r.Stats(); st.Aborted != 3 || st.Control != 2 {
		t.Errorf("stats %+v: want 3 aborted records and 2 markers passed over", st)
	}
	if l.fetches.Load() < 2 {
		t.Errorf("%d fetches: the marker must open a response of its own", l.fetches.Load())
	}
}

// A record set that holds a message set of magic 1 (before KIP-98) is
// decoded by kafka-go's own decoder, its magic-2 batches with it: the
// records keep their offsets, values and timestamps, and a
// LOG_APPEND_TIME batch's records carry its MaxTimestamp.
func TestReaderDecodesOlderMessageSets(t *testing.T) {
	first := t0.UnixMilli()
	var v1 []byte
	for off := range int64(2) {
		m := kmsg.MessageV1{Offset: off, Magic: 1, Timestamp: first + 100 + off, Key: []byte("k"), Value: []byte(strings.Repeat("w", int(off)+1))}
		enc := m.AppendTo(nil)
		binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))           // MessageSize: what follows it
		binary.BigEndian.PutUint32(enc[12:], crc32.ChecksumIEEE(enc[16:])) // CRC: of what follows it
		v1 = append(v1, enc...)
	}
	l := &scriptedLog{batches: []scriptedBatch{
		{base: 0, last: 1, raw: v1},
		{base: 2, last: 4, offsets: span(2, 5), value: 3, attrs: wire.AttrLogAppendTime},
		{base: 5, last: 6, offsets: span(5, 7), value: 4},
	}, hwm: 7}
	recs, _, err := readScriptedRecords(t, l, 0, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d %s=%s %d %v", r.Offset, r.Key, r.Value, r.Time.UnixMilli()-first, r.TimestampType))
	}
	lat, ct := record.LogAppendTime, record.CreateTime
	want := []string{"0 k=w 100 " + fmt.Sprint(ct), "1 k=ww 101 " + fmt.Sprint(ct),
		"2 =vvv 2 " + fmt.Sprint(lat), "3 =vvv 2 " + fmt.Sprint(lat), "4 =vvv 2 " + fmt.Sprint(lat),
		"5 =vvvv 0 " + fmt.Sprint(ct), "6 =vvvv 1 " + fmt.Sprint(ct)}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
