package source

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

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

// batchSet is a partition's record set (kafka-go's decoding) and the
// MaxTimestamp of each of its LOG_APPEND_TIME batches.
type batchSet struct {
	protocol.RecordSet
	// appendTimes are the LOG_APPEND_TIME batches of magic 2 in log order.
	appendTimes []batchTime
}

// batchTime is a LOG_APPEND_TIME batch's base offset and MaxTimestamp
// (milliseconds since the epoch).
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

// setBufs recycles the buffers a record set is read into: kafka-go copies
// the batches into its own pages as it decodes them.
var setBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ReadFrom reads a record set as fetch responses v0 to v11 carry it (an
// int32 size, -1 for none, then the batches; the last may be cut short by
// the fetch size). It notes the LOG_APPEND_TIME batches and leaves the
// decoding to protocol.RecordSet.
func (s *batchSet) ReadFrom(r io.Reader) (int64, error) {
	s.appendTimes = s.appendTimes[:0]
	buf := setBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 4<<20 {
			buf.Reset()
			setBufs.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := io.CopyN(buf, r, 4); err != nil {
		return int64(buf.Len()), err
	}
	size := int32(binary.BigEndian.Uint32(buf.Bytes()))
	if size > 0 {
		buf.Grow(int(size))
		if _, err := io.CopyN(buf, r, int64(size)); err != nil {
			return int64(buf.Len()), fmt.Errorf("read record set: %w", err)
		}
		s.appendTimes = scanAppendTimes(buf.Bytes()[4:], s.appendTimes)
	}
	read := int64(buf.Len())
	_, err := s.RecordSet.ReadFrom(buf)
	return read, err
}

// scanAppendTimes appends the base offset and MaxTimestamp of each whole
// magic-2 batch of set whose timestamp type is LOG_APPEND_TIME.
func scanAppendTimes(set []byte, out []batchTime) []batchTime {
	for len(set) > batchMagicAt {
		n := int64(int32(binary.BigEndian.Uint32(set[batchLengthAt:]))) + batchLengthAt + 4
		if n <= batchMagicAt || n > int64(len(set)) {
			break // a batch cut short by the fetch size, or not a batch
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
	return out
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
