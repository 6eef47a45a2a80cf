package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/replay-tool/replay/internal/testenv"
)

// t0 is the first timestamp of the hand-encoded batches.
var t0 = time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)

// encodeBatch encodes a v2 record batch with a record at each offset in
// [base, last] and the given attributes (the records section is not
// compressed: the header fields are what matters).
func encodeBatch(base, last int64, attrs int16) []byte {
	var raw []byte
	for off := base; off <= last; off++ {
		raw = testenv.AppendRecord(raw, kmsg.Record{TimestampDelta64: off - base, OffsetDelta: int32(off - base), Value: []byte("vvvvv")})
	}
	first := t0.UnixMilli()
	return testenv.SealBatch(kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(last - base),
		Attributes: attrs, FirstTimestamp: first, MaxTimestamp: first + last - base, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(last - base + 1), Records: raw})
}

// AppendTimes notes exactly the whole LOG_APPEND_TIME batches of a record
// set, with their base offsets and MaxTimestamps, and stops at a batch the
// fetch size cut short.
func TestAppendTimes(t *testing.T) {
	var set []byte
	set = append(set, encodeBatch(10, 12, AttrLogAppendTime)...)
	set = append(set, encodeBatch(13, 14, 0)...)
	set = append(set, encodeBatch(15, 19, AttrLogAppendTime|4)...) // zstd bit too: the header is not compressed
	whole := len(set)
	cut := encodeBatch(20, 22, AttrLogAppendTime)
	set = append(set, cut[:len(cut)-3]...)
	first := t0.UnixMilli()
	want := []BatchTime{{Base: 10, MaxTimestamp: first + 2}, {Base: 15, MaxTimestamp: first + 4}}
	if got := AppendTimes(set, nil); !slices.Equal(got, want) {
		t.Errorf("scan: %+v, want %+v", got, want)
	}
	if got := AppendTimes(set[:whole-1], nil); !slices.Equal(got, want[:1]) {
		t.Errorf("scan without the last byte of the third batch: %+v, want %+v", got, want[:1])
	}
	if got := AppendTimes(set[:5], nil); len(got) != 0 {
		t.Errorf("scan of 5 bytes: %+v", got)
	}
}

// producedSets returns record sets as a broker serves them, written by
// franz-go's producer into kfake: one per compression codec (none, gzip,
// snappy, lz4, zstd; records with null and empty keys and values,
// headers), a transactional producer's committed and aborted batches with
// their control batches, and copies of the uncompressed and lz4 sets
// stamped LOG_APPEND_TIME (attribute and MaxTimestamp set and the CRC-32C
// sealed again, as a broker with message.timestamp.type=LogAppendTime
// rewrites a batch's header).
func producedSets(tb testing.TB) [][]byte {
	tb.Helper()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	topics := []string{"none", "gzip", "snappy", "lz4", "zstd", "txn"}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := func(topic string, n int) []*kgo.Record {
		var out []*kgo.Record
		for i := range n {
			r := &kgo.Record{Topic: topic, Value: []byte(strings.Repeat(`{"id":1,"status":"paid"}`, i%3))}
			switch i % 4 {
			case 0:
				r.Key = []byte("k")
			case 1:
				r.Key, r.Headers = []byte{}, []kgo.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "n"}}
			case 2:
				r.Value = nil
			}
			out = append(out, r)
		}
		return out
	}
	for i, codec := range codecs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
		if err != nil {
			tb.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs(topics[i], 20)...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
		cl.Close()
	}
	tx, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("wire"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		tb.Fatal(err)
	}
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := tx.BeginTransaction(); err != nil {
			tb.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, recs("txn", 5)...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			tb.Fatal(err)
		}
	}
	tx.Close()

	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Fetch), 11) // by topic name: v13 names topics by id
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(vs))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	var sets [][]byte
	for _, topic := range topics {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes = 11, -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			tb.Fatal(err)
		}
		set := resp.Topics[0].Partitions[0].RecordBatches
		if len(set) == 0 {
			tb.Fatalf("topic %s: no records fetched (error code %d)", topic, resp.Topics[0].Partitions[0].ErrorCode)
		}
		sets = append(sets, set)
	}
	for _, set := range [][]byte{sets[0], sets[3]} {
		stamped := bytes.Clone(set)
		for p := stamped; len(p) > 0; {
			n, ok := span(p)
			if !ok {
				tb.Fatal("a produced set does not split into batches")
			}
			binary.BigEndian.PutUint16(p[attrsAt:], binary.BigEndian.Uint16(p[attrsAt:])|AttrLogAppendTime)
			binary.BigEndian.PutUint64(p[maxTimeAt:], uint64(t0.UnixMilli()))
			binary.BigEndian.PutUint32(p[crcAt:], crc32.Checksum(p[attrsAt:n], crc32c))
			p = p[n:]
		}
		sets = append(sets, stamped)
	}
	return sets
}

// The produced sets hold what the seed corpus claims: every codec, a
// transaction's data and markers, LOG_APPEND_TIME batches.
func TestProducedSets(t *testing.T) {
	seen := map[string]bool{}
	for _, set := range producedSets(t) {
		for p := set; ; {
			b, rest, ok, err := NextBatch(p)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			p = rest
			seen[[]string{"none", "gzip", "snappy", "lz4", "zstd", "?", "?", "?"}[b.Attrs&AttrCompression]] = true
			if b.Control() {
				seen["control"] = true
			} else if b.Transactional() {
				seen["transactional"] = true
			}
			if b.LogAppendTime() {
				seen["logappendtime"] = true
			}
		}
	}
	for _, want := range []string{"none", "gzip", "snappy", "lz4", "zstd", "control", "transactional", "logappendtime"} {
		if !seen[want] {
			t.Errorf("no %s batch among the produced sets (seen %v)", want, seen)
		}
	}
}

// FuzzBatchAgainstKmsg walks a record set as the reader does and decodes
// the same bytes with franz-go's kmsg (RecordBatch.ReadFrom for each
// batch, Record.ReadFrom for each record of its records section,
// decompressed by this package): both accept the same batches and
// records, and agree on every field (kmsg reads some malformed records that
// Kafka refuses, such as a negative header count: a record only kmsg
// accepts must be one kmsg would not encode so). With reseal set, each whole batch's
// CRC-32C is computed again before the walk, so that mutations reach the
// records and the decompressors instead of failing the checksum.
func FuzzBatchAgainstKmsg(f *testing.F) {
	for _, set := range producedSets(f) {
		f.Add(set, false)
	}
	f.Add(encodeBatch(10, 12, AttrLogAppendTime|AttrTransactional), true)
	f.Fuzz(func(t *testing.T, set []byte, reseal bool) {
		if reseal {
			set = bytes.Clone(set)
			for p := set; ; {
				n, ok := span(p)
				if !ok || n < HeaderBytes {
					break
				}
				binary.BigEndian.PutUint32(p[crcAt:], crc32.Checksum(p[attrsAt:n], crc32c))
				p = p[n:]
			}
		}
		for len(set) > 0 {
			b, rest, ok, err := NextBatch(set)
			var kb kmsg.RecordBatch
			kerr := kb.ReadFrom(set)
			crcOK := kerr == nil && len(set) >= int(kb.Length)+12 && uint32(kb.CRC) == crc32.Checksum(set[attrsAt:12+kb.Length], crc32c)
			switch {
			case ok:
				if kerr != nil || kb.Magic != 2 || !crcOK {
					t.Fatalf("batch accepted; kmsg: %v, magic %d, crc ok %v", kerr, kb.Magic, crcOK)
				}
				if b.Base != kb.FirstOffset || b.LastDelta != kb.LastOffsetDelta || b.Attrs != kb.Attributes || b.FirstTime != kb.FirstTimestamp ||
					b.MaxTime != kb.MaxTimestamp || b.ProducerID != kb.ProducerID || b.Count != kb.NumRecords || !bytes.Equal(b.Records, kb.Records) {
					t.Fatalf("batch header %+v, kmsg %+v", b, kb)
				}
				compareRecords(t, &b)
				set = rest
			case err == nil: // cut short
				if kerr == nil {
					t.Fatalf("batch cut short; kmsg read one of %d bytes", kb.Length)
				}
				return
			default:
				if kerr == nil && kb.Magic == 2 && crcOK {
					t.Fatalf("batch refused (%v); kmsg read a valid one", err)
				}
				return
			}
		}
	})
}

// compareRecords walks b's records (decompressed) and decodes each with
// kmsg.Record.ReadFrom over the bytes the walk took for it.
func compareRecords(t *testing.T, b *Batch) {
	buf := DecodeBuffers.Get()
	defer DecodeBuffers.Put(buf)
	data, err := b.Decompress(buf)
	if err != nil {
		return // kmsg does not decompress
	}
	var a Arena
	for i := int32(0); i < b.Count && len(data) > 0; i++ {
		rec, rest, err := NextRecord(b, data)
		var kr kmsg.Record
		if err != nil {
			// The span the record's length declares is no record kmsg
			// encodes (kmsg reads more leniently than Kafka: a negative
			// header count as none).
			if l, n := binary.Varint(data); n > 0 && l >= 0 && l <= int64(len(data)-n) {
				if span := data[:n+int(l)]; kr.ReadFrom(span) == nil && bytes.Equal(kr.AppendTo(nil), span) {
					t.Fatalf("record %d refused (%v); kmsg read %+v", i, err, kr)
				}
			}
			return
		}
		span := data[:len(data)-len(rest)]
		data = rest
		r, _, err := a.Copy("t", 0, &rec)
		kerr := kr.ReadFrom(span)
		if err != nil {
			if kerr == nil && bytes.Equal(kr.AppendTo(nil), span) {
				t.Fatalf("record %d: headers refused (%v); kmsg read %+v", i, err, kr.Headers)
			}
			return
		}
		if kerr != nil {
			t.Fatalf("record %d accepted (%+v); kmsg: %v", i, rec, kerr)
		}
		same := func(x, y []byte) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
		if r.Offset != b.Base+int64(kr.OffsetDelta) || r.Time.UnixMilli() != b.FirstTime+kr.TimestampDelta64 ||
			!same(r.Key, kr.Key) || !same(r.Value, kr.Value) || len(r.Headers) != len(kr.Headers) {
			t.Fatalf("record %d: %+v, kmsg %+v", i, r, kr)
		}
		for j, h := range r.Headers {
			if h.Key != kr.Headers[j].Key || !same(h.Value, kr.Headers[j].Value) {
				t.Fatalf("record %d header %d: %q=%q, kmsg %q=%q", i, j, h.Key, h.Value, kr.Headers[j].Key, kr.Headers[j].Value)
			}
		}
	}
}
