package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/segmentio/kafka-go/compress"
)

// Record batches of magic 2 (KIP-98), decoded from a Fetch response's
// bytes.
//
// kafka-go decodes each batch of a response into its own 64 KiB pages (a
// new page per batch, freed to the GC afterwards) and hands out each key
// and value as a reader over them, which the reader then copied into its
// arena: with many partitions and small batches most of a run's
// allocation and a third of its CPU went there. Here the response's record
// set stays in one recycled buffer and its batches are walked in place:
// uncompressed records are copied once, from the response bytes into the
// arena; compressed batches are decompressed whole into a recycled buffer
// first (codec.go).

// crc32c is the table of the CRC-32C (Castagnoli) that covers a batch from
// its attributes to its end.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Offsets of the batch header fields not named in fetchresp.go.
const (
	batchCRCAt        = 17 // uint32, CRC-32C of the bytes from batchAttrsAt on
	batchLastDeltaAt  = 23 // int32, lastOffsetDelta
	batchFirstTimeAt  = 27 // int64, baseTimestamp (ms)
	batchProducerAt   = 43 // int64, producerId
	batchCountAt      = 57 // int32, number of records
	attrCompression   = 0x07
	attrTransactional = 1 << 4
	attrControl       = 1 << 5
)

// v2Batch is the header of one whole record batch of magic 2 and its
// records section as fetched (still compressed when the batch is).
type v2Batch struct {
	base       int64
	lastDelta  int32
	attrs      int16
	firstTime  int64 // baseTimestamp, ms
	maxTime    int64 // maxTimestamp, ms
	producerID int64
	count      int32
	records    []byte
}

// last is the batch's last offset (its header's, which compaction keeps
// even when it removed the batch's last records).
func (b *v2Batch) last() int64 { return b.base + int64(b.lastDelta) }

func (b *v2Batch) control() bool       { return b.attrs&attrControl != 0 }
func (b *v2Batch) transactional() bool { return b.attrs&attrTransactional != 0 }

// nextBatch splits the first whole batch off set. ok is false when set
// holds no whole batch (it is empty, or its last batch was cut short by the
// fetch size); an error is a batch that is not of magic 2 or fails its
// CRC-32C.
func nextBatch(set []byte) (b v2Batch, rest []byte, ok bool, err error) {
	if len(set) < batchMagicAt+1 {
		return b, nil, false, nil
	}
	n := int64(int32(binary.BigEndian.Uint32(set[batchLengthAt:]))) + batchLengthAt + 4
	if n > int64(len(set)) {
		return b, nil, false, nil // cut short by the fetch size
	}
	if n < batchHeaderBytes {
		return b, nil, false, fmt.Errorf("record batch at offset %d declares %d bytes, fewer than a batch header's %d", int64(binary.BigEndian.Uint64(set)), n, batchHeaderBytes)
	}
	if set[batchMagicAt] != 2 {
		return b, nil, false, fmt.Errorf("record batch of magic %d at offset %d in a record set of magic 2", set[batchMagicAt], int64(binary.BigEndian.Uint64(set)))
	}
	raw := set[:n]
	b = v2Batch{
		base:       int64(binary.BigEndian.Uint64(raw)),
		lastDelta:  int32(binary.BigEndian.Uint32(raw[batchLastDeltaAt:])),
		attrs:      int16(binary.BigEndian.Uint16(raw[batchAttrsAt:])),
		firstTime:  int64(binary.BigEndian.Uint64(raw[batchFirstTimeAt:])),
		maxTime:    int64(binary.BigEndian.Uint64(raw[batchMaxTimeAt:])),
		producerID: int64(binary.BigEndian.Uint64(raw[batchProducerAt:])),
		count:      int32(binary.BigEndian.Uint32(raw[batchCountAt:])),
		records:    raw[batchHeaderBytes:],
	}
	if want, got := binary.BigEndian.Uint32(raw[batchCRCAt:]), crc32.Checksum(raw[batchAttrsAt:], crc32c); want != got {
		return b, nil, false, fmt.Errorf("record batch at offset %d: crc32 checksum mismatch (computed=%d found=%d)", b.base, got, want)
	}
	return b, set[n:], true, nil
}

// batchSpan is the length of the batch (or message set entry: all magics
// are framed alike, offset and size, then the magic byte at the same
// place) at the start of set, and whether set holds it whole. A length
// field too small to reach past the magic byte (corrupt or hostile) is
// not whole either, so no walk over set can loop or slice backwards.
func batchSpan(set []byte) (int, bool) {
	if len(set) <= batchMagicAt {
		return 0, false
	}
	n := int64(int32(binary.BigEndian.Uint32(set[batchLengthAt:]))) + batchLengthAt + 4
	if n <= batchMagicAt || n > int64(len(set)) {
		return 0, false
	}
	return int(n), true
}

// allV2 reports whether every whole batch of set is of magic 2 (the
// record sets of brokers since Kafka 0.11). A set whose framing breaks
// counts as magic 2: nextBatch reports what is wrong with it.
func allV2(set []byte) bool {
	for {
		n, ok := batchSpan(set)
		if !ok {
			return true
		}
		if set[batchMagicAt] != 2 {
			return false
		}
		set = set[n:]
	}
}

// recordCount is the number of records the whole batches of set declare
// (their headers' counts), to size the slice they are read into at once.
func recordCount(set []byte) int {
	n := 0
	for {
		size, ok := batchSpan(set)
		if !ok || size < batchHeaderBytes {
			return n
		}
		n += int(max(int32(binary.BigEndian.Uint32(set[batchCountAt:])), 0))
		set = set[size:]
	}
}

// decompress returns b's records section uncompressed, in buf's out
// buffer when the batch is compressed.
func (b *v2Batch) decompress(buf *decodeBuf) ([]byte, error) {
	c := compress.Compression(b.attrs & attrCompression)
	var err error
	switch c {
	case 0:
		return b.records, nil
	case compress.Zstd:
		buf.out, err = decodeZstd(buf.out[:0], b.records)
	case compress.Lz4:
		buf.out, err = decodeLz4(buf.out[:0], b.records)
	default:
		codec := c.Codec()
		if codec == nil {
			return nil, fmt.Errorf("unsupported compression codec (%d)", c)
		}
		zr := codec.NewReader(bytes.NewReader(b.records))
		buf.out, err = readAll(buf.out, zr)
		zr.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("decompress record batch: %w", err)
	}
	if len(buf.out) > maxDecodedBatch {
		return nil, fmt.Errorf("record batch at offset %d decompresses to more than %d bytes", b.base, maxDecodedBatch)
	}
	return buf.out, nil
}

// v2Record is one record of a batch; its slices point into the batch's
// (uncompressed) records section. A nil Key or Value is null (length -1).
type v2Record struct {
	offset  int64
	time    int64 // ms
	key     []byte
	value   []byte
	headers []byte // the headers, still encoded
	nhdrs   int
}

var errMalformedRecord = errors.New("malformed record")

// varint reads a zigzag varint (Kafka's varint and varlong).
func varint(p []byte) (int64, []byte, error) {
	if len(p) > 0 && p[0] < 0x80 { // one byte, as most lengths and deltas are
		x := int64(p[0])
		return x>>1 ^ -(x & 1), p[1:], nil // zigzag
	}
	v, n := binary.Varint(p)
	if n <= 0 {
		return 0, nil, errMalformedRecord
	}
	return v, p[n:], nil
}

// varBytes reads a varint length and that many bytes (nil for -1).
func varBytes(p []byte) ([]byte, []byte, error) {
	n, p, err := varint(p)
	if err != nil {
		return nil, nil, err
	}
	if n < 0 {
		return nil, p, nil
	}
	if n > int64(len(p)) {
		return nil, nil, errMalformedRecord
	}
	return p[:n:n], p[n:], nil
}

// nextRecord reads the record at the start of p (records of magic 2: a
// varint length, then attributes, timestamp and offset deltas, key, value
// and headers) and returns what follows it.
func nextRecord(b *v2Batch, p []byte) (r v2Record, rest []byte, err error) {
	size, p, err := varint(p)
	if err != nil || size < 1 || size > int64(len(p)) {
		return r, nil, errMalformedRecord
	}
	rec, rest := p[1:size], p[size:] // the attributes byte is unused
	tsDelta, rec, err := varint(rec)
	if err != nil {
		return r, nil, err
	}
	offDelta, rec, err := varint(rec)
	if err != nil {
		return r, nil, err
	}
	r.offset, r.time = b.base+offDelta, b.firstTime+tsDelta
	if r.key, rec, err = varBytes(rec); err != nil {
		return r, nil, err
	}
	if r.value, rec, err = varBytes(rec); err != nil {
		return r, nil, err
	}
	n, rec, err := varint(rec)
	if err != nil || n < 0 || n > int64(len(rec)) {
		return r, nil, errMalformedRecord
	}
	r.nhdrs, r.headers = int(n), rec
	return r, rest, nil
}

// nextHeader reads one encoded header (varint-length key and value; a
// null value has length -1).
func nextHeader(p []byte) (key, value, rest []byte, err error) {
	if key, p, err = varBytes(p); err != nil {
		return nil, nil, nil, err
	}
	if value, p, err = varBytes(p); err != nil {
		return nil, nil, nil, err
	}
	return key, value, p, nil
}

// controlType reads a control record's key (version int16, type int16):
// 0 is ABORT, 1 COMMIT (KIP-98).
func controlType(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes", len(key))
	}
	return int16(binary.BigEndian.Uint16(key[2:])), nil
}
