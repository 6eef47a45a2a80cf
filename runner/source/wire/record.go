package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is one record of a batch; its slices point into the batch's
// (uncompressed) records section. A nil Key or Value is null (length -1).
type Record struct {
	Offset int64
	Time   int64 // ms: the batch's FirstTime plus the record's delta
	Key    []byte
	Value  []byte
	// Headers are the record's headers, still encoded (NextHeader reads
	// them); NumHeaders is how many it declares.
	Headers    []byte
	NumHeaders int
}

// ErrMalformedRecord is a record whose varints or lengths do not fit its
// bytes.
var ErrMalformedRecord = errors.New("malformed record")

// varint reads a zigzag varint (Kafka's varint and varlong).
func varint(p []byte) (int64, []byte, error) {
	if len(p) > 0 && p[0] < 0x80 { // one byte, as most lengths and deltas are
		x := int64(p[0])
		return x>>1 ^ -(x & 1), p[1:], nil // zigzag
	}
	v, n := binary.Varint(p)
	if n <= 0 {
		return 0, nil, ErrMalformedRecord
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
		return nil, nil, ErrMalformedRecord
	}
	return p[:n:n], p[n:], nil
}

// NextRecord reads the record at the start of p, a part of b's
// uncompressed records section (records of magic 2: a varint length, then
// attributes, timestamp and offset deltas, key, value and headers), and
// returns what follows it. An error is ErrMalformedRecord.
func NextRecord(b *Batch, p []byte) (r Record, rest []byte, err error) {
	size, p, err := varint(p)
	if err != nil || size < 1 || size > int64(len(p)) {
		return r, nil, ErrMalformedRecord
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
	r.Offset, r.Time = b.Base+offDelta, b.FirstTime+tsDelta
	if r.Key, rec, err = varBytes(rec); err != nil {
		return r, nil, err
	}
	if r.Value, rec, err = varBytes(rec); err != nil {
		return r, nil, err
	}
	n, rec, err := varint(rec)
	if err != nil || n < 0 || n > int64(len(rec)) {
		return r, nil, ErrMalformedRecord
	}
	r.NumHeaders, r.Headers = int(n), rec
	return r, rest, nil
}

// NextHeader reads one encoded header (varint-length key and value; a
// null value has length -1) off p. An error is ErrMalformedRecord.
func NextHeader(p []byte) (key, value, rest []byte, err error) {
	if key, p, err = varBytes(p); err != nil {
		return nil, nil, nil, err
	}
	if value, p, err = varBytes(p); err != nil {
		return nil, nil, nil, err
	}
	return key, value, p, nil
}

// ControlAbort is the type of an ABORT marker (a COMMIT marker's is 1),
// KIP-98.
const ControlAbort = 0

// ControlType reads a control record's key (version int16, type int16).
func ControlType(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes", len(key))
	}
	return int16(binary.BigEndian.Uint16(key[2:])), nil
}
