package postgres

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// testVals holds every kind of column with a NULL where the kind has one,
// and times before and after PostgreSQL's epoch.
func testVals() []colVals {
	ts := time.Date(2026, 11, 3, 10, 0, 0, 123e6, time.UTC)
	old := time.Date(1969, 7, 20, 20, 17, 40, 5e6, time.FixedZone("x", 3600))
	return []colVals{
		{kind: sendText, text: []pgtype.Text{{String: "orders/0/1", Valid: true}, {}, {Valid: true}}},
		{kind: sendBytes, bytes: [][]byte{[]byte("\x00\xff"), nil, {}}},
		{kind: sendJSON, bytes: [][]byte{[]byte(`{"id":1}`), nil, []byte(`null`)}},
		{kind: sendTime, times: []time.Time{ts, old, time.UnixMilli(-1)}},
		{kind: sendInt4, i4: []int32{3, -4, 1 << 30}},
		{kind: sendInt8, i8: []int64{1 << 40, -7, 0}},
		{kind: sendJSONText, bytes: [][]byte{[]byte(`{"a":[1,2]}`), nil, []byte(`"s"`)}},
	}
}

// pgxSlice is the column's values as the plain slice pgx encodes.
func pgxSlice(a *colVals) any {
	switch a.kind {
	case sendBytes, sendJSON, sendJSONText:
		return a.bytes
	case sendTime:
		return a.times
	case sendInt4:
		return a.i4
	case sendInt8:
		return a.i8
	}
	return a.text
}

// Every kind's values, as an array parameter and as COPY fields, are the
// bytes pgx sends for the same Go values in PostgreSQL's binary format.
func TestBinaryEncodingsArePgx(t *testing.T) {
	m := pgtype.NewMap()
	vals := testVals()
	for i := range vals {
		a := &vals[i]
		for _, n := range []int{0, a.len()} {
			part := *a
			part.text, part.bytes, part.times, part.i4, part.i8 = nonEmpty(a.text, n), nonEmpty(a.bytes, n), nonEmpty(a.times, n), nonEmpty(a.i4, n), nonEmpty(a.i8, n)
			want, err := m.Encode(a.kind.arrayOID(), pgtype.BinaryFormatCode, pgxSlice(&part), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := part.appendArray(nil); !bytes.Equal(got, want) {
				t.Errorf("%s[] of %d: appendArray %x, pgx %x", a.kind.sql(), n, got, want)
			}
		}
		for j := range a.len() {
			for _, asJSONB := range []bool{false, true} {
				oid := a.kind.oid()
				if asJSONB {
					if a.kind != sendJSONText {
						continue
					}
					oid = pgtype.JSONBOID
				}
				got := a.appendValue(nil, j, asJSONB)
				v := pgxSlice(a)
				var elem any
				null := false
				switch s := v.(type) {
				case []pgtype.Text:
					elem, null = s[j], !s[j].Valid
				case [][]byte:
					elem, null = s[j], s[j] == nil
				case []time.Time:
					elem = s[j]
				case []int32:
					elem = s[j]
				case []int64:
					elem = s[j]
				}
				want, err := m.Encode(oid, pgtype.BinaryFormatCode, elem, nil)
				if err != nil {
					t.Fatal(err)
				}
				wantField := binary.BigEndian.AppendUint32(nil, uint32(len(want)))
				if null {
					wantField = binary.BigEndian.AppendUint32(nil, 0xffffffff)
				}
				wantField = append(wantField, want...)
				if !bytes.Equal(got, wantField) {
					t.Errorf("%s value %d (into jsonb %v): appendValue %x, pgx %x", a.kind.sql(), j, asJSONB, got, wantField)
				}
			}
		}
	}
}

func nonEmpty[T any](s []T, n int) []T {
	if s == nil {
		return nil
	}
	return s[:n:n]
}

// The arrays go through the codec the sink registers on its connections,
// and the first one makes room for all of a statement's arrays; values of
// one kind bound to another kind's parameter are an error, not bytes the
// server would read as something else.
func TestColArrayCodec(t *testing.T) {
	m := pgtype.NewMap()
	registerArrays(m)
	registerArrays(m) // twice is once: no arrayCodec wraps another
	for k := sendText; k <= sendJSONText; k++ {
		typ, _ := m.TypeForOID(k.arrayOID())
		c, ok := typ.Codec.(arrayCodec)
		if _, twice := c.Codec.(arrayCodec); !ok || twice {
			t.Errorf("%s[]: codec %T wrapping %T, want arrayCodec once", k.sql(), typ.Codec, c.Codec)
		}
	}
	vals := testVals()
	args := (&pgRows{vals: vals}).args()
	var buf []byte
	for i, arg := range args {
		at := len(buf)
		var err error
		buf, err = m.Encode(vals[i].kind.arrayOID(), pgtype.BinaryFormatCode, arg, buf)
		if err != nil {
			t.Fatalf("column %d: %v", i, err)
		}
		if want := vals[i].appendArray(nil); !bytes.Equal(buf[at:], want) {
			t.Errorf("column %d: codec %x, want %x", i, buf[at:], want)
		}
		if i == 0 && cap(buf) < arg.(colArray).need {
			t.Errorf("the first array left room for %d bytes, want %d", cap(buf), arg.(colArray).need)
		}
	}
	if total := args[0].(colArray).need; total < len(buf) {
		t.Errorf("the arrays took %d bytes, more than the %d reserved", len(buf), total)
	}
	if _, err := m.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, args[0], nil); err == nil {
		t.Error("text values bound to an int8[] parameter: no error")
	}
	// Other values of the array types are pgx's as before.
	got, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, []string{"a", "b"}, nil)
	want, _ := pgtype.NewMap().Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, []string{"a", "b"}, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("[]string as text[]: %x (%v), want %x", got, err, want)
	}
}
