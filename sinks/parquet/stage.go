package parquet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"time"
	"unsafe"

	"github.com/replay-tool/replay/internal/record"
)

// The staging file of a partition's unfinished object holds its records,
// each one frame: a 4-byte big-endian payload length, the payload's
// CRC-32C, then the payload: offset, timestamp (Unix ms), timestamp type,
// key, value, headers (count, then key and value each), idempotency key,
// then, for a record the decode stage decoded, the byte 1, the decoded
// value and its schema id (4 bytes), the decoded key and its schema id
// (nothing for the others); each byte string as a 4-byte length
// (0xFFFFFFFF for nil) and its bytes.
// A torn or damaged last frame (a crash mid-write) ends the file.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const nilLen = 0xFFFFFFFF

// appendFrame appends r's frame to b.
func appendFrame(b []byte, r *record.Record) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time.UnixMilli()))
	b = append(b, byte(r.TimestampType))
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Headers)))
	for _, h := range r.Headers {
		b = appendBytes(b, []byte(h.Key))
		b = appendBytes(b, h.Value)
	}
	b = appendBytes(b, []byte(r.IdemKey))
	if d := r.Note.DecodedOrNil(); d != nil {
		b = append(b, 1)
		b = appendBytes(b, d.Value)
		b = binary.BigEndian.AppendUint32(b, uint32(d.ValueSchemaID))
		b = appendBytes(b, d.Key)
		b = binary.BigEndian.AppendUint32(b, uint32(d.KeySchemaID))
	}
	payload := b[start+8:]
	binary.BigEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(payload, crcTable))
	return b
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, nilLen)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// frameReader reads the frames of a staging file.
type frameReader struct {
	r         *bufio.Reader
	topic     string
	partition int32
	// end is the byte after the last complete frame read.
	end int64
	buf []byte
	// arena, when not nil, receives each frame's payload, and the
	// records next returns point into it instead of holding copies; their
	// headers are cut from hdrs.
	arena []byte
	hdrs  []record.Header
}

func newFrameReader(f io.Reader, topic string, partition int32) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(f, stageChunk), topic: topic, partition: partition}
}

// errTorn ends a staging file at a frame that is incomplete or damaged.
var errTorn = errors.New("torn frame")

// next reads the next record: io.EOF after the last complete frame,
// errTorn at a torn or damaged one. The record's byte slices are its own.
func (fr *frameReader) next() (record.Record, error) {
	var head [8]byte
	if _, err := io.ReadFull(fr.r, head[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errTorn
		}
		return record.Record{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > 1<<31 {
		return record.Record{}, errTorn
	}
	var payload []byte
	if fr.arena != nil {
		at := len(fr.arena)
		fr.arena = append(fr.arena, make([]byte, n)...)
		payload = fr.arena[at:]
	} else {
		if cap(fr.buf) < int(n) {
			fr.buf = make([]byte, n)
		}
		payload = fr.buf[:n]
	}
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return record.Record{}, errTorn
		}
		return record.Record{}, err
	}
	if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(head[4:]) {
		return record.Record{}, errTorn
	}
	var hdrs *[]record.Header
	if fr.arena != nil {
		hdrs = &fr.hdrs
	}
	r, err := decodePayload(payload, fr.arena != nil, hdrs)
	if err != nil {
		return record.Record{}, errTorn
	}
	r.Topic, r.Partition = fr.topic, fr.partition
	fr.end += 8 + int64(n)
	return r, nil
}

// decodePayload is the inverse of appendFrame's payload. The record's
// byte slices are copies, or point into p when alias is set; its headers
// are appended to *slab when slab is not nil (a slice of their own
// otherwise).
func decodePayload(p []byte, alias bool, slab *[]record.Header) (record.Record, error) {
	d := decoder{p: p, alias: alias}
	r := record.Record{Offset: int64(d.u64())}
	r.Time = time.UnixMilli(int64(d.u64())).UTC()
	r.TimestampType = record.TimestampType(d.byte())
	r.Key = d.bytes()
	r.Value = d.bytes()
	if n := d.u32(); n > 0 && d.err == nil {
		if int(n) > len(d.p) {
			return r, errTorn
		}
		var hs []record.Header
		if slab != nil {
			at := len(*slab)
			*slab = slices.Grow(*slab, int(n))[:at+int(n)]
			hs = (*slab)[at : at+int(n) : at+int(n)]
		} else {
			hs = make([]record.Header, n)
		}
		for i := range hs {
			hs[i] = record.Header{Key: d.str(), Value: d.bytes()}
		}
		r.Headers = hs
	}
	r.IdemKey = string(d.bytes())
	if d.err == nil && len(d.p) != 0 && d.byte() == 1 {
		dec := &record.Decoded{Value: d.bytes(), ValueSchemaID: int32(d.u32())}
		dec.Key, dec.KeySchemaID = d.bytes(), int32(d.u32())
		r.Note = &record.Note{Decoded: dec}
	}
	if d.err == nil && len(d.p) != 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.p))
	}
	return r, d.err
}

// decoder reads appendFrame's fields, remembering the first error.
type decoder struct {
	p     []byte
	err   error
	alias bool
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.p) {
		d.err = errTorn
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

// fixed is take of n bytes (at most 8), zeros after an error.
func (d *decoder) fixed(n int) []byte {
	if b := d.take(n); b != nil {
		return b
	}
	return make([]byte, 8)[:n]
}

func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.fixed(8)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.fixed(4)) }
func (d *decoder) byte() byte  { return d.fixed(1)[0] }

func (d *decoder) bytes() []byte {
	n := d.u32()
	if n == nilLen || d.err != nil {
		return nil
	}
	b := d.take(int(n))
	if b == nil {
		return nil
	}
	if d.alias {
		return b[:len(b):len(b)]
	}
	return append([]byte{}, b...)
}

// str is bytes as a string: one that points into the payload when alias
// is set (the record's bytes do too).
func (d *decoder) str() string {
	b := d.bytes()
	if d.alias && len(b) > 0 {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

// recoverStaging reads the staging file f back: it cuts a torn last frame
// off and returns the number of records and the offset after the last
// (-1 when none).
func recoverStaging(f *os.File, topic string, partition int32) (rows, next int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	fr := newFrameReader(f, topic, partition)
	next = -1
	for {
		r, err := fr.next()
		if err == io.EOF || errors.Is(err, errTorn) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		rows++
		next = r.Offset + 1
	}
	if err := f.Truncate(fr.end); err != nil {
		return 0, 0, err
	}
	if _, err := f.Seek(fr.end, io.SeekStart); err != nil {
		return 0, 0, err
	}
	return rows, next, f.Sync()
}
