package testenv

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EncodeBatch encodes recs as one record batch of magic 2 (KIP-98) at
// offset base, uncompressed, with attributes attrs (e.g. 0x08, the
// LOG_APPEND_TIME timestamp type, which kgo's producer never sets) and
// the given MaxTimestamp; the first timestamp is recs[0]'s and each
// record's delta its own Timestamp's distance from it. The CRC is right.
func EncodeBatch(base int64, attrs int16, maxTimestamp time.Time, recs ...*kgo.Record) []byte {
	first := recs[0].Timestamp.UnixMilli()
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp.UnixMilli() - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		raw = AppendRecord(raw, kr)
	}
	return SealBatch(kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTimestamp.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: raw})
}

// AppendRecord appends r, a record of a v2 batch, to raw with its Length
// set from the rest.
func AppendRecord(raw []byte, r kmsg.Record) []byte {
	r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows a one-byte zero length
	return r.AppendTo(raw)
}

// SealBatch returns the encoding of b, a v2 record batch, with its Length
// and its CRC (CRC-32C of everything after the CRC field, KIP-98) set from
// the rest, as a broker stores it.
func SealBatch(b kmsg.RecordBatch) []byte {
	b.Length = int32(len(b.AppendTo(nil)) - 12) // what follows FirstOffset and Length
	b.CRC = int32(crc32.Checksum(b.AppendTo(nil)[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

// ServeBatches makes the cluster answer every Fetch from now on with the
// given encoded record batches of topic's partition (in offset order, as
// EncodeBatch makes them), the way a broker serves its log: from the batch
// that holds the fetch offset, whole batches up to the request's size, at
// least one (KIP-74), with high watermark and last stable offset hwm. The
// cluster still answers every other request (metadata, ListOffsets,
// commits) from its own log, so produce the same offsets to it first.
//
// It is for layouts kfake cannot store: kfake stamps a LOG_APPEND_TIME
// batch with its append time but leaves the batch's CRC as produced, so
// every client rejects the batch it serves.
func (k *Kafka) ServeBatches(t testing.TB, topic string, partition int32, hwm int64, batches ...[]byte) {
	t.Helper()
	details, err := k.Admin(t).ListTopics(t.Context(), topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		t.Fatalf("topic %s: %v", topic, err)
	}
	id := details[topic].ID // Fetch v13 (Kafka 3.1, KIP-516) names topics by ID
	k.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(req.GetVersion())
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset = rp.Partition, hwm, hwm
				sp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null record set
				switch {
				case rt.Topic != topic && rt.TopicID != id, rp.Partition != partition:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case rp.FetchOffset > hwm:
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				default:
					sp.RecordBatches = append(sp.RecordBatches, serveFrom(batches, rp.FetchOffset, int(min(rp.PartitionMaxBytes, req.MaxBytes)))...)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// serveFrom returns what a broker returns of batches for a fetch at
// offset: the batches from the one holding offset, whole, up to maxBytes,
// at least one.
func serveFrom(batches [][]byte, offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range batches {
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if last < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out
}
