// Package wire decodes the record batches of a Fetch response (magic 2,
// KIP-98) in place: the batch framing and header, CRC-32C, the records and
// their headers, whole-batch decompression, the aborted-transaction filter
// of read_committed reads, and the arena the records' bytes are copied
// into. It does no I/O and keeps no state outside the values it returns
// (apart from bounded free lists of decode buffers), so that it can be
// tested and fuzzed alone.
//
// Walking a response's record set in place avoids decoding each batch into
// pages of its own and each key and value into a reader: uncompressed
// records are copied once, from the fetched bytes into an Arena;
// compressed batches are decompressed whole into a recycled buffer first.
package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record batch layout of magic 2 (KIP-98): the offsets of the fields read
// here, from the start of a batch.
const (
	lengthAt    = 8  // int32, the bytes after this field
	magicAt     = 16 // int8
	crcAt       = 17 // uint32, CRC-32C of the bytes from attrsAt on
	attrsAt     = 21 // int16
	lastDeltaAt = 23 // int32, lastOffsetDelta
	firstTimeAt = 27 // int64, baseTimestamp (ms)
	maxTimeAt   = 35 // int64, maxTimestamp (ms)
	producerAt  = 43 // int64, producerId
	countAt     = 57 // int32, number of records
	// HeaderBytes is the size of a batch header of magic 2, up to its
	// records.
	HeaderBytes = 61
)

// Batch attribute bits (KIP-98).
const (
	// AttrCompression masks the compression codec: 0 none, 1 gzip, 2
	// snappy, 3 lz4, 4 zstd.
	AttrCompression = 0x07
	// AttrLogAppendTime is the timestampType bit: the broker's append
	// time (KIP-32).
	AttrLogAppendTime = 1 << 3
	// AttrTransactional marks a batch of a transaction.
	AttrTransactional = 1 << 4
	// AttrControl marks a batch of transaction markers.
	AttrControl = 1 << 5
)

// crc32c is the table of the CRC-32C (Castagnoli) that covers a batch from
// its attributes to its end.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Batch is the header of one whole record batch of magic 2 and its
// records section as fetched (still compressed when the batch is).
type Batch struct {
	Base       int64 // baseOffset
	LastDelta  int32 // lastOffsetDelta
	Attrs      int16 // attributes
	FirstTime  int64 // baseTimestamp, ms
	MaxTime    int64 // maxTimestamp, ms
	ProducerID int64
	Count      int32 // the number of records the header declares
	// Records is the records section, a slice of the set NextBatch read.
	Records []byte
}

// Last is the batch's last offset (its header's, which compaction keeps
// even when it removed the batch's last records).
func (b *Batch) Last() int64 { return b.Base + int64(b.LastDelta) }

// Control reports a batch of transaction markers.
func (b *Batch) Control() bool { return b.Attrs&AttrControl != 0 }

// Transactional reports a batch written in a transaction.
func (b *Batch) Transactional() bool { return b.Attrs&AttrTransactional != 0 }

// LogAppendTime reports a batch whose records carry the broker's append
// time, its MaxTime (KIP-32), instead of their own timestamps.
func (b *Batch) LogAppendTime() bool { return b.Attrs&AttrLogAppendTime != 0 }

// NextBatch splits the first whole batch off set, a record set as a Fetch
// response carries it (without its size). ok is false when set holds no
// whole batch (it is empty, or its last batch was cut short by the fetch
// size); an error is a batch that is not of magic 2, declares fewer bytes
// than its header, or fails its CRC-32C.
func NextBatch(set []byte) (b Batch, rest []byte, ok bool, err error) {
	if len(set) < magicAt+1 {
		return b, nil, false, nil
	}
	n := int64(int32(binary.BigEndian.Uint32(set[lengthAt:]))) + lengthAt + 4
	if n > int64(len(set)) {
		return b, nil, false, nil // cut short by the fetch size
	}
	if n < HeaderBytes {
		return b, nil, false, fmt.Errorf("record batch at offset %d declares %d bytes, fewer than a batch header's %d", int64(binary.BigEndian.Uint64(set)), n, HeaderBytes)
	}
	if set[magicAt] != 2 {
		return b, nil, false, fmt.Errorf("record batch of magic %d at offset %d in a record set of magic 2", set[magicAt], int64(binary.BigEndian.Uint64(set)))
	}
	raw := set[:n]
	b = Batch{
		Base:       int64(binary.BigEndian.Uint64(raw)),
		LastDelta:  int32(binary.BigEndian.Uint32(raw[lastDeltaAt:])),
		Attrs:      int16(binary.BigEndian.Uint16(raw[attrsAt:])),
		FirstTime:  int64(binary.BigEndian.Uint64(raw[firstTimeAt:])),
		MaxTime:    int64(binary.BigEndian.Uint64(raw[maxTimeAt:])),
		ProducerID: int64(binary.BigEndian.Uint64(raw[producerAt:])),
		Count:      int32(binary.BigEndian.Uint32(raw[countAt:])),
		Records:    raw[HeaderBytes:],
	}
	if want, got := binary.BigEndian.Uint32(raw[crcAt:]), crc32.Checksum(raw[attrsAt:], crc32c); want != got {
		return b, nil, false, fmt.Errorf("record batch at offset %d: crc32 checksum mismatch (computed=%d found=%d)", b.Base, got, want)
	}
	return b, set[n:], true, nil
}

// span is the length of the batch (or message set entry: all magics are
// framed alike, offset and size, then the magic byte at the same place) at
// the start of set, and whether set holds it whole. A length field too
// small to reach past the magic byte (corrupt or hostile) is not whole
// either, so no walk over set can loop or slice backwards.
func span(set []byte) (int, bool) {
	if len(set) <= magicAt {
		return 0, false
	}
	n := int64(int32(binary.BigEndian.Uint32(set[lengthAt:]))) + lengthAt + 4
	if n <= magicAt || n > int64(len(set)) {
		return 0, false
	}
	return int(n), true
}

// AllV2 reports whether every whole batch of set is of magic 2 (the
// record sets of brokers since Kafka 0.11). A set whose framing breaks
// counts as magic 2: NextBatch reports what is wrong with it.
func AllV2(set []byte) bool {
	for {
		n, ok := span(set)
		if !ok {
			return true
		}
		if set[magicAt] != 2 {
			return false
		}
		set = set[n:]
	}
}

// RecordCount is the number of records the whole batches of set declare
// (their headers' counts), to size the slice they are read into at once.
func RecordCount(set []byte) int {
	n := 0
	for {
		size, ok := span(set)
		if !ok || size < HeaderBytes {
			return n
		}
		n += int(max(int32(binary.BigEndian.Uint32(set[countAt:])), 0))
		set = set[size:]
	}
}

// BatchTime is a LOG_APPEND_TIME batch's base offset and MaxTimestamp
// (ms).
type BatchTime struct {
	Base, MaxTimestamp int64
}

// AppendTimes appends to out the base offset and MaxTimestamp of each
// whole magic-2 batch of set whose timestamp type is LOG_APPEND_TIME. It
// is for record sets that also hold message sets of magic 0 or 1 (before
// KIP-98), which are framed alike and skipped.
func AppendTimes(set []byte, out []BatchTime) []BatchTime {
	for {
		n, ok := span(set)
		if !ok {
			return out // a batch cut short by the fetch size, or not a batch
		}
		if set[magicAt] == 2 && n >= HeaderBytes && binary.BigEndian.Uint16(set[attrsAt:])&AttrLogAppendTime != 0 {
			out = append(out, BatchTime{
				Base:         int64(binary.BigEndian.Uint64(set)),
				MaxTimestamp: int64(binary.BigEndian.Uint64(set[maxTimeAt:])),
			})
		}
		set = set[n:]
	}
}
