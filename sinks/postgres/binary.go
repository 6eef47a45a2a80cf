package postgres

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// The sink's values in PostgreSQL's binary formats: the statements' array
// parameters and the rows of COPY ... FROM STDIN (FORMAT binary), the
// bytes pgx would send (TestBinaryEncodingsArePgx) without its per-value
// plan lookups.

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp epoch,
// in microseconds since the Unix epoch.
const pgEpochMicros = 946_684_800 * 1_000_000

// oid is the type OID a kind's values travel as.
func (k sendKind) oid() uint32 {
	return [...]uint32{pgtype.TextOID, pgtype.ByteaOID, pgtype.JSONBOID, pgtype.TimestamptzOID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TextOID}[k]
}

// arrayOID is the OID of the array of the kind's type.
func (k sendKind) arrayOID() uint32 {
	return [...]uint32{pgtype.TextArrayOID, pgtype.ByteaArrayOID, pgtype.JSONBArrayOID, pgtype.TimestamptzArrayOID, pgtype.Int4ArrayOID, pgtype.Int8ArrayOID, pgtype.TextArrayOID}[k]
}

// len is the number of values (only the kind's slice holds any).
func (a *colVals) len() int {
	return len(a.text) + len(a.bytes) + len(a.times) + len(a.i4) + len(a.i8)
}

// appendValue appends value i as a binary field: its length (-1 for
// NULL), then its bytes. asJSONB sends a sendJSONText value into a jsonb
// column (COPY into the table itself): jsonb's binary form is a version
// byte, 1, before the text.
func (a *colVals) appendValue(buf []byte, i int, asJSONB bool) []byte {
	be := binary.BigEndian
	switch a.kind {
	case sendBytes, sendJSON, sendJSONText:
		b := a.bytes[i]
		if b == nil {
			return be.AppendUint32(buf, 0xffffffff)
		}
		if a.kind == sendJSON || asJSONB {
			buf = be.AppendUint32(buf, uint32(len(b)+1))
			return append(append(buf, 1), b...)
		}
		buf = be.AppendUint32(buf, uint32(len(b)))
		return append(buf, b...)
	case sendTime:
		t := a.times[i]
		buf = be.AppendUint32(buf, 8)
		return be.AppendUint64(buf, uint64(t.Unix()*1_000_000+int64(t.Nanosecond())/1000-pgEpochMicros))
	case sendInt4:
		buf = be.AppendUint32(buf, 4)
		return be.AppendUint32(buf, uint32(a.i4[i]))
	case sendInt8:
		buf = be.AppendUint32(buf, 8)
		return be.AppendUint64(buf, uint64(a.i8[i]))
	}
	t := a.text[i]
	if !t.Valid {
		return be.AppendUint32(buf, 0xffffffff)
	}
	buf = be.AppendUint32(buf, uint32(len(t.String)))
	return append(buf, t.String...)
}

// appendArray appends the values as a one-dimensional array of the kind's
// type in binary (array_send): the dimensions, a has-NULLs flag, the
// element OID, the length and lower bound 1, then each value.
func (a *colVals) appendArray(buf []byte) []byte {
	be := binary.BigEndian
	n := a.len()
	buf = be.AppendUint32(buf, 1)
	nulls := len(buf)
	buf = be.AppendUint32(buf, 0)
	buf = be.AppendUint32(buf, a.kind.oid())
	buf = be.AppendUint32(buf, uint32(n))
	buf = be.AppendUint32(buf, 1)
	for i := range n {
		at := len(buf)
		buf = a.appendValue(buf, i, false)
		if be.Uint32(buf[at:]) == 0xffffffff {
			be.PutUint32(buf[nulls:], 1)
		}
	}
	return buf
}

// colArray is a column's values as a statement's array parameter; the
// first one's encoding makes room for need bytes, all the statement's
// arrays (pgx would grow its buffer by doubling for every batch).
type colArray struct {
	vals *colVals
	need int
}

// arrayCodec is pgx's codec of an array type, but for a colArray in
// binary, which it encodes with appendArray (registerArrays).
type arrayCodec struct{ pgtype.Codec }

func (c arrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(colArray); ok && format == pgtype.BinaryFormatCode {
		return colArrayPlan{oid: oid}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// colArrayPlan encodes a colArray bound to a parameter of type oid.
type colArrayPlan struct{ oid uint32 }

func (p colArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	a := value.(colArray)
	if a.vals.kind.arrayOID() != p.oid {
		return nil, fmt.Errorf("postgres sink: %s values bound to a parameter of type OID %d", a.vals.kind.sql(), p.oid)
	}
	return a.vals.appendArray(slices.Grow(buf, a.need)), nil
}

// registerArrays puts arrayCodec in front of the codecs of m's array
// types that colArrays travel as.
func registerArrays(m *pgtype.Map) {
	for k := sendText; k <= sendJSONText; k++ {
		t, ok := m.TypeForOID(k.arrayOID())
		if !ok {
			continue
		}
		if _, done := t.Codec.(arrayCodec); done {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: arrayCodec{t.Codec}})
	}
}

// copyHeader starts a binary COPY stream: the signature, no flags, no
// header extension.
const copyHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// copySQL is the COPY statement that reads a binary stream of cols into
// table (quoted).
func copySQL(table string, cols []string) string {
	return "COPY " + table + " (" + strings.Join(cols, ", ") + ") FROM STDIN (FORMAT binary)"
}

// copyReader is rows as a binary COPY stream, encoded as the server reads
// it, about 64 KiB at a time: a tuple is its field count, then each field
// (appendValue); a -1 ends the stream. intoTable: the stream goes into
// the table itself, whose columns have their declared types, not into
// the COPY table.
type copyReader struct {
	rows      *pgRows
	intoTable bool
	next      int // the next row to encode
	buf       []byte
	off       int // buf[off:] is not read yet
	done      bool
}

const copyChunk = 64 << 10

func (r *copyReader) Read(p []byte) (int, error) {
	if r.off == len(r.buf) {
		if r.done {
			return 0, io.EOF
		}
		r.fill()
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill encodes the next rows into buf, at least one, until it holds
// about copyChunk bytes.
func (r *copyReader) fill() {
	b := r.buf[:0]
	if b == nil { // the first fill starts the stream
		b = append(make([]byte, 0, copyChunk+copyChunk/4), copyHeader...)
	}
	r.off = 0
	rows := r.rows
	n := rows.len()
	for r.next < n && len(b) < copyChunk {
		b = binary.BigEndian.AppendUint16(b, uint16(len(rows.vals)))
		for c := range rows.vals {
			b = rows.vals[c].appendValue(b, r.next, r.intoTable && rows.vals[c].kind == sendJSONText)
		}
		r.next++
	}
	if r.next == n {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
		r.done = true
	}
	r.buf = b
}
