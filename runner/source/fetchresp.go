package source

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// The Fetch response as the reader decodes it.
//
// kafka-go's fetch.Response decodes record batches without their
// MaxTimestamp, and a record of a LOG_APPEND_TIME batch has no timestamp of
// its own: Kafka gives each of them the batch's MaxTimestamp, the broker's
// append time (KIP-32; DefaultRecordBatch, LogValidator). fetchResponse is
// fetch.Response field for field (the same versions, v0 to v11), except
// that its record set also keeps the MaxTimestamp of each LOG_APPEND_TIME
// batch. It is registered in place of fetch.Response for the Fetch API,
// for the whole process: every Fetch sent through a kafka-go Transport
// comes back as a *fetchResponse (kafka.Reader and kafka.Conn decode
// fetches on their own and are not affected; nothing in replay uses
// kafka.Client.Fetch).
func init() {
	protocol.Register(&fetch.Request{}, &fetchResponse{})
}

type fetchResponse struct {
	ThrottleTimeMs int32        `kafka:"min=v1,max=v11"`
	ErrorCode      int16        `kafka:"min=v7,max=v11"`
	SessionID      int32        `kafka:"min=v7,max=v11"`
	Topics         []fetchTopic `kafka:"min=v0,max=v11"`
}

func (r *fetchResponse) ApiKey() protocol.ApiKey { return protocol.Fetch }

type fetchTopic struct {
	Topic      string           `kafka:"min=v0,max=v11"`
	Partitions []fetchPartition `kafka:"min=v0,max=v11"`
}

type fetchPartition struct {
	Partition            int32                       `kafka:"min=v0,max=v11"`
	ErrorCode            int16                       `kafka:"min=v0,max=v11"`
	HighWatermark        int64                       `kafka:"min=v0,max=v11"`
	LastStableOffset     int64                       `kafka:"min=v4,max=v11"`
	LogStartOffset       int64                       `kafka:"min=v5,max=v11"`
	AbortedTransactions  []fetch.ResponseTransaction `kafka:"min=v4,max=v11"`
	PreferredReadReplica int32                       `kafka:"min=v11,max=v11"`
	RecordSet            batchSet                    `kafka:"min=v0,max=v11"`
}

// batchSet is a partition's record set and the MaxTimestamp of each of its
// LOG_APPEND_TIME batches. A record set whose batches are all of magic 2
// (every broker since Kafka 0.11) is kept as it came, in raw, and walked
// by the reader itself (batch.go); an older one is decoded by kafka-go
// (protocol.RecordSet) and its LOG_APPEND_TIME batches noted.
type batchSet struct {
	protocol.RecordSet
	// raw holds the bytes of a record set of magic 2 (nil otherwise):
	// give it back with release once its records are copied out.
	raw *setBuf
	// appendTimes are the LOG_APPEND_TIME batches of magic 2 in log order,
	// for a record set kafka-go decoded.
	appendTimes []batchTime
}

type batchTime struct {
	base, maxTimestamp int64
}

// Record batch layout of magic 2 (KIP-98): the offsets of the fields read
// here, from the start of a batch.
const (
	batchLengthAt    = 8  // int32, the bytes after this field
	batchMagicAt     = 16 // int8
	batchAttrsAt     = 21 // int16
	batchMaxTimeAt   = 35 // int64
	batchHeaderBytes = 61
	// attrLogAppendTime is the timestampType bit of the attributes.
	attrLogAppendTime = 1 << 3
)

// setBuf holds a fetched record set's bytes (b, without the size).
type setBuf struct{ b []byte }

// setBufs recycles the buffers record sets are read into: a bounded free
// list (not a sync.Pool, which a GC cycle empties), each kept under
// keptDecodeBytes.
var setBufs = make(chan *setBuf, 32)

func getSetBuf() *setBuf {
	select {
	case b := <-setBufs:
		return b
	default:
		return &setBuf{}
	}
}

// release gives the record set's buffer back; the batches and records read
// from it must no longer be used.
func (s *batchSet) release() {
	b := s.raw
	s.raw = nil
	if b == nil || cap(b.b) > keptDecodeBytes {
		return
	}
	b.b = b.b[:0]
	select {
	case setBufs <- b:
	default:
	}
}

// ReadFrom reads a record set as fetch responses v0 to v11 carry it (an
// int32 size, -1 for none, then the batches; the last may be cut short by
// the fetch size). A record set of magic 2 is kept in raw; an older one is
// decoded by protocol.RecordSet, with its LOG_APPEND_TIME batches noted.
func (s *batchSet) ReadFrom(r io.Reader) (int64, error) {
	s.appendTimes = s.appendTimes[:0]
	s.release()
	var sz [4]byte
	if n, err := io.ReadFull(r, sz[:]); err != nil {
		return int64(n), err
	}
	size := int32(binary.BigEndian.Uint32(sz[:]))
	if size <= 0 {
		s.Records = nil
		return 4, nil
	}
	buf := getSetBuf()
	buf.b = slices.Grow(buf.b[:0], int(size))[:size]
	if n, err := io.ReadFull(r, buf.b); err != nil {
		return 4 + int64(n), fmt.Errorf("read record set: %w", err)
	}
	read := 4 + int64(size)
	if allV2(buf.b) {
		s.Records, s.raw = nil, buf
		return read, nil
	}
	s.appendTimes = scanAppendTimes(buf.b, s.appendTimes)
	_, err := s.RecordSet.ReadFrom(io.MultiReader(bytes.NewReader(sz[:]), bytes.NewReader(buf.b)))
	s.raw = buf
	s.release()
	return read, err
}

// scanAppendTimes appends the base offset and MaxTimestamp of each whole
// magic-2 batch of set whose timestamp type is LOG_APPEND_TIME.
func scanAppendTimes(set []byte, out []batchTime) []batchTime {
	for {
		n, ok := batchSpan(set)
		if !ok {
			return out // a batch cut short by the fetch size, or not a batch
		}
		// Message sets of magic 0 and 1 (before KIP-98) are framed alike
		// (offset, size) and skipped: their timestamps are kafka-go's.
		if set[batchMagicAt] == 2 && n >= batchHeaderBytes && binary.BigEndian.Uint16(set[batchAttrsAt:])&attrLogAppendTime != 0 {
			out = append(out, batchTime{
				base:         int64(binary.BigEndian.Uint64(set)),
				maxTimestamp: int64(binary.BigEndian.Uint64(set[batchMaxTimeAt:])),
			})
		}
		set = set[n:]
	}
}

// appendTime returns the MaxTimestamp of the LOG_APPEND_TIME batch at base
// (false: none was noted).
func (s *batchSet) appendTime(base int64) (int64, bool) {
	for _, t := range s.appendTimes {
		if t.base == base {
			return t.maxTimestamp, true
		}
	}
	return 0, false
}
