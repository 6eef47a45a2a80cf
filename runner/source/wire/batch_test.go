package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A batch walked in place gives each record's offset, timestamp, key,
// value and headers as encoded, null (length -1) apart from empty, and a
// batch whose bytes do not match its CRC-32C is an error, not records.
func TestBatchWalk(t *testing.T) {
	first := t0.UnixMilli()
	recs := []kmsg.Record{
		{TimestampDelta64: 0, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}, {Key: "n", Value: nil}, {Key: "e", Value: []byte{}}}},
		{TimestampDelta64: 7, OffsetDelta: 2, Key: nil, Value: []byte{}},
		{TimestampDelta64: 9, OffsetDelta: 3, Key: []byte{}, Value: nil},
	}
	var raw []byte
	for _, r := range recs {
		raw = testenv.AppendRecord(raw, r)
	}
	enc := testenv.SealBatch(kmsg.RecordBatch{FirstOffset: 40, PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: 5, FirstTimestamp: first, MaxTimestamp: first + 9,
		ProducerID: 77, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: raw})

	b, rest, ok, err := NextBatch(append(enc, 1, 2, 3))
	if err != nil || !ok || !bytes.Equal(rest, []byte{1, 2, 3}) {
		t.Fatalf("NextBatch: ok %v, err %v, rest %v", ok, err, rest)
	}
	if b.Base != 40 || b.Last() != 45 || b.ProducerID != 77 || b.Count != 3 || b.MaxTime != first+9 {
		t.Fatalf("header: %+v", b)
	}
	var a Arena
	p := b.Records
	var got []string
	for range b.Count {
		rec, next, err := NextRecord(&b, p)
		if err != nil {
			t.Fatal(err)
		}
		p = next
		r, _, err := a.Copy("t", 0, &rec)
		if err != nil {
			t.Fatal(err)
		}
		s := func(v []byte) string {
			if v == nil {
				return "null"
			}
			return "'" + string(v) + "'"
		}
		line := []string{r.Time.Sub(t0).String(), s(r.Key), s(r.Value)}
		for _, h := range r.Headers {
			line = append(line, h.Key+"="+s(h.Value))
		}
		got = append(got, strings.Join(append([]string{string(rune('0' + r.Offset - 40))}, line...), " "))
	}
	want := []string{"0 0s 'k0' 'v0' h='x' n=null e=''", "2 7ms null ''", "3 9ms '' null"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(p) != 0 {
		t.Errorf("%d bytes left after the records", len(p))
	}

	if _, _, ok, err := NextBatch(enc[:len(enc)-1]); ok || err != nil {
		t.Errorf("a batch cut short: ok %v, err %v; want neither", ok, err)
	}
	bad := bytes.Clone(enc)
	bad[len(bad)-1] ^= 1
	if _, _, _, err := NextBatch(bad); err == nil || !strings.Contains(err.Error(), "crc32") {
		t.Errorf("a batch with a flipped bit: %v, want a checksum error", err)
	}
}

// Whatever bytes a batch's records section holds (a broker bug, a hostile
// producer whose batch passed its CRC, a decompressor's output), walking
// it returns records or an error, never a panic or a record that reaches
// past the data.
func FuzzRecordsSection(f *testing.F) {
	var seed []byte
	for _, r := range []kmsg.Record{
		{TimestampDelta64: 3, OffsetDelta: 0, Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}, {Key: "n"}}},
		{OffsetDelta: 1, Value: []byte{}},
	} {
		seed = testenv.AppendRecord(seed, r)
	}
	f.Add(seed, int32(2))
	f.Add([]byte{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}, int32(1))
	f.Add([]byte{}, int32(0))
	f.Fuzz(func(t *testing.T, data []byte, count int32) {
		b := &Batch{Base: 100, FirstTime: 1, Count: count, Records: data}
		var a Arena
		for i := int32(0); i < b.Count && len(data) > 0; i++ {
			rec, rest, err := NextRecord(b, data)
			if err != nil {
				return
			}
			if len(rest) >= len(data) {
				t.Fatalf("record %d consumed nothing", i)
			}
			data = rest
			r, _, err := a.Copy("t", 0, &rec)
			if err != nil {
				return
			}
			if len(r.Key)+len(r.Value) > len(b.Records) {
				t.Fatalf("record %d holds %d bytes of a %d-byte section", i, len(r.Key)+len(r.Value), len(b.Records))
			}
		}
	})
}

// A record set whose first length field is corrupt (too small to reach
// past its own header, or negative) ends every walk over it: the framing
// scans stop, and the reader's walk reports the batch.
func TestCorruptBatchLength(t *testing.T) {
	for _, length := range []int32{-12, -100, 0, 4, 40} {
		set := make([]byte, 80)
		binary.BigEndian.PutUint32(set[lengthAt:], uint32(length))
		set[magicAt] = 2
		done := make(chan struct{})
		go func() {
			defer close(done)
			if !AllV2(set) {
				t.Errorf("length %d: AllV2 false", length)
			}
			RecordCount(set)
			AppendTimes(set, nil)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("length %d: a scan of the record set never ended", length)
		}
		if _, _, ok, err := NextBatch(set); ok || err == nil {
			t.Errorf("length %d: NextBatch ok %v, err %v; want an error", length, ok, err)
		}
	}
}

// varint reads what binary.Varint reads (zigzag, KIP-98's record fields),
// the one-byte fast path included, and refuses what it refuses.
func TestVarintMatchesBinaryVarint(t *testing.T) {
	var inputs [][]byte
	for b := 0; b < 256; b++ {
		inputs = append(inputs, []byte{byte(b)}, []byte{byte(b), 0x01}, []byte{byte(b), 0x80})
	}
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 1 << 40, -(1 << 40), math.MaxInt64, math.MinInt64} {
		inputs = append(inputs, binary.AppendVarint(nil, v), binary.AppendVarint([]byte{}, v)[:1])
	}
	inputs = append(inputs, nil, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	for _, in := range inputs {
		want, n := binary.Varint(in)
		got, rest, err := varint(in)
		if (err != nil) != (n <= 0) {
			t.Fatalf("varint(%x): err %v, binary.Varint read %d bytes", in, err, n)
		}
		if err == nil && (got != want || len(rest) != len(in)-n) {
			t.Fatalf("varint(%x) = %d with %d bytes left, binary.Varint %d with %d", in, got, len(rest), want, len(in)-n)
		}
	}
}
