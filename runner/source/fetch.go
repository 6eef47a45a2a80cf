package source

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source/wire"
)

// fetchExchange is the reader's Fetch. A kafka-go Transport picks the
// connection (pool, TLS, SASL, the route to the leader); on it the exchange
// writes and reads itself (protocol.RawExchanger): kafka-go encodes the
// request at the negotiated version (v11 at most), franz-go's kmsg decodes
// the response, and the record set stays in the recycled buffer for the
// wire package to walk in place. (kafka-go's fetch.Response would drop
// each batch's MaxTimestamp, KIP-32.) Nothing is registered with kafka-go.
type fetchExchange struct {
	fetch.Request // one topic, one partition
	clientID      string
	version       int16 // the connection's Fetch version (Prepare)
}

// fetchPartition is the response to a fetchExchange: its top-level error
// code (topError), and the requested partition's answer (found false: the
// response does not mention it). RecordBatches, a record set of magic 2
// (every broker since Kafka 0.11), points into buf: give it back with
// release once its records are copied out. A record set with older
// message sets is decoded by kafka-go (legacy) instead, with the
// MaxTimestamps of its LOG_APPEND_TIME batches of magic 2 in appendTimes.
type fetchPartition struct {
	kmsg.FetchResponseTopicPartition
	topError    int16
	found       bool
	buf         *wire.Buffer
	legacy      *protocol.RecordSet
	appendTimes []wire.BatchTime
}

// ApiKey implements protocol.Message.
func (*fetchPartition) ApiKey() protocol.ApiKey { return protocol.Fetch }

// Prepare implements protocol.PreparedMessage: the transport's connection
// gives the Fetch version it negotiated.
func (f *fetchExchange) Prepare(version int16) { f.version = version }

// Required implements protocol.RawExchanger: every fetch is exchanged by
// RawExchange.
func (*fetchExchange) Required(map[protocol.ApiKey]int16) bool { return true }

// maxFetchVersion is the newest Fetch version RawExchange reads: the last
// one with a response header v0 and no tagged fields (kafka-go's
// fetch.Request stops there too).
const maxFetchVersion = 11

// correlationIDs numbers the fetch exchanges.
var correlationIDs atomic.Int32

// RawExchange implements protocol.RawExchanger: it writes the request on
// rw, the transport's connection, and reads and decodes its response. An
// error leaves the connection unusable (the transport closes it).
func (f *fetchExchange) RawExchange(rw io.ReadWriter) (protocol.Message, error) {
	if f.version > maxFetchVersion {
		// A flexible response (v12+) has a header v1 and compact fields,
		// which this exchange does not read.
		return nil, fmt.Errorf("fetch v%d negotiated: the reader reads Fetch up to v%d", f.version, maxFetchVersion)
	}
	id := correlationIDs.Add(1)
	if err := protocol.WriteRequest(rw, f.version, id, f.clientID, &f.Request); err != nil {
		return nil, err
	}
	var hdr [8]byte // size, correlation id (a response header v0)
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return nil, err
	}
	size, got := int32(binary.BigEndian.Uint32(hdr[:])), int32(binary.BigEndian.Uint32(hdr[4:]))
	if got != id {
		return nil, fmt.Errorf("correlation id mismatch (expected=%d, found=%d)", id, got)
	}
	if size < 4 {
		return nil, fmt.Errorf("fetch response of %d bytes", size)
	}
	buf := responseBuffers.Get()
	buf.B = slices.Grow(buf.B[:0], int(size-4))[:size-4]
	if _, err := io.ReadFull(rw, buf.B); err != nil {
		responseBuffers.Put(buf)
		return nil, fmt.Errorf("read fetch response: %w", err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = f.version
	if err := resp.ReadFrom(buf.B); err != nil {
		responseBuffers.Put(buf)
		return nil, fmt.Errorf("decode fetch response v%d: %w", f.version, err)
	}
	ans := &fetchPartition{topError: resp.ErrorCode, buf: buf}
	want := f.Topics[0]
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == want.Topic && p.Partition == want.Partitions[0].Partition && !ans.found {
				ans.FetchResponseTopicPartition, ans.found = p, true
			}
		}
	}
	if !ans.found {
		ans.release()
		return ans, nil
	}
	return ans, ans.decodeLegacy()
}

// decodeLegacy decodes a record set that holds message sets older than
// magic 2 with kafka-go's decoder (protocol.RecordSet), noting the
// MaxTimestamp of its LOG_APPEND_TIME batches of magic 2, and gives the
// buffer back. A record set of magic 2 is left as it came.
func (p *fetchPartition) decodeLegacy() error {
	set := p.RecordBatches
	if len(set) == 0 || wire.AllV2(set) {
		return nil
	}
	p.appendTimes = wire.AppendTimes(set, nil)
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(set)))
	p.legacy = &protocol.RecordSet{}
	_, err := p.legacy.ReadFrom(io.MultiReader(bytes.NewReader(size[:]), bytes.NewReader(set)))
	p.release()
	return err
}

// responseBuffers recycles the buffers fetch responses are read into.
var responseBuffers = make(wire.Buffers, 32)

// release gives the response's buffer back; the batches and records read
// from RecordBatches must no longer be used.
func (p *fetchPartition) release() {
	if p.buf != nil {
		responseBuffers.Put(p.buf)
		p.buf, p.RecordBatches = nil, nil
	}
}

// copyRecord copies rec (of a legacy record set, decoded by kafka-go) out
// of kafka-go's pooled pages into a record.Record cut from a, and returns
// its size in bytes (key, value and headers).
func copyRecord(a *wire.Arena, topic string, partition int32, rec *protocol.Record) (record.Record, int, error) {
	defer closeRecord(rec)
	key, err := readBytes(a, rec.Key)
	if err != nil {
		return record.Record{}, 0, err
	}
	val, err := readBytes(a, rec.Value)
	if err != nil {
		return record.Record{}, 0, err
	}
	n := len(key) + len(val)
	var hs []record.Header
	if len(rec.Headers) > 0 {
		hs = a.Headers(len(rec.Headers))
		for i, h := range rec.Headers {
			hs[i] = record.Header{Key: h.Key, Value: a.Bytes(h.Value)}
			n += len(h.Key) + len(h.Value)
		}
	}
	return record.Record{Topic: topic, Partition: partition, Offset: rec.Offset, Time: rec.Time, Key: key, Value: val, Headers: hs}, n, nil
}

// readBytes copies b into a (nil stays nil: null).
func readBytes(a *wire.Arena, b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	s := a.Take(b.Len())
	_, err := io.ReadFull(b, s)
	return s, err
}

func closeRecord(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}
