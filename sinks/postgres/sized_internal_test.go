package postgres

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// A sizedArray encodes to exactly the bytes of its slice, for every kind
// of column, into a buffer that had room for all the arrays of the
// statement from the first one on.
func TestSizedArrayEncodesAsItsSlice(t *testing.T) {
	m := pgtype.NewMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapSized}, m.TryWrapEncodePlanFuncs...)
	ts := time.Date(2026, 11, 3, 10, 0, 0, 123e6, time.UTC)
	rows := &pgRows{vals: []colVals{
		{kind: sendText, text: []pgtype.Text{{String: "orders/0/1", Valid: true}, {}}},
		{kind: sendBytes, bytes: [][]byte{[]byte("\x00\xff"), nil}},
		{kind: sendJSON, bytes: [][]byte{[]byte(`{"id":1}`), nil}},
		{kind: sendTime, times: []time.Time{ts, ts}},
		{kind: sendInt4, i4: []int32{3, 4}},
		{kind: sendInt8, i8: []int64{1 << 40, 7}},
	}}
	oids := []uint32{pgtype.TextArrayOID, pgtype.ByteaArrayOID, pgtype.JSONBArrayOID, pgtype.TimestamptzArrayOID, pgtype.Int4ArrayOID, pgtype.Int8ArrayOID}
	args := rows.args()
	var buf []byte
	for i, arg := range args {
		want, err := m.Encode(oids[i], pgtype.BinaryFormatCode, rows.vals[i].arg(), nil)
		if err != nil {
			t.Fatal(err)
		}
		at := len(buf)
		buf, err = m.Encode(oids[i], pgtype.BinaryFormatCode, arg, buf)
		if err != nil {
			t.Fatalf("column %d: %v", i, err)
		}
		if got := buf[at:]; !bytes.Equal(got, want) {
			t.Fatalf("column %d: encoded %x, want %x", i, got, want)
		}
		if i == 0 && cap(buf) < args[0].(sizer).need() {
			t.Fatalf("the first array left room for %d bytes, want %d", cap(buf), args[0].(sizer).need())
		}
	}
	if total := args[0].(sizer).need(); total < len(buf) {
		t.Fatalf("the arrays took %d bytes, more than the %d reserved", len(buf), total)
	}
}
