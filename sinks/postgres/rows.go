package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// The rows of one batch as the statements bind them: one array per column.

// pgRows holds rows as the statements' column arrays, one row per key.
type pgRows struct {
	cols []pgColumn
	recs []*record.Record // the record of each row
	vals []colVals        // one per column
	// cells is add's scratch row; arena holds the bytes add encodes
	// (headers JSON), cut into the rows' cells.
	cells []cell
	arena []byte
}

// colVals holds one column's values in the slice of its sendKind.
type colVals struct {
	kind  sendKind
	text  []pgtype.Text
	bytes [][]byte
	times []time.Time
	i4    []int32
	i8    []int64
}

func newRows(cols []pgColumn, n int) *pgRows {
	r := &pgRows{cols: cols, recs: make([]*record.Record, 0, n), vals: make([]colVals, len(cols))}
	for i, c := range cols {
		a := &r.vals[i]
		a.kind = c.send
		switch a.kind {
		case sendText:
			a.text = make([]pgtype.Text, 0, n)
		case sendBytes, sendJSON, sendJSONText:
			a.bytes = make([][]byte, 0, n)
		case sendTime:
			a.times = make([]time.Time, 0, n)
		case sendInt4:
			a.i4 = make([]int32, 0, n)
		case sendInt8:
			a.i8 = make([]int64, 0, n)
		}
	}
	return r
}

// add appends the row of r, whose idempotency key is key; a value that
// cannot be stored exactly is an error saying why, and nothing is appended.
// needVersion is set for an upsert of a record that is no tombstone: it
// must have a version when the sink has a version column ver.
func (rows *pgRows) add(r *record.Record, key string, ver int, needVersion bool, vj *valueJSON) error {
	cs := encode.Cells{Record: r, Key: key}
	if rows.cells == nil {
		rows.cells = make([]cell, len(rows.cols))
	}
	cells := rows.cells
	clear(cells)
	for i := range rows.cols {
		c := &rows.cols[i]
		var err error
		direct := c.send == sendTime || c.send == sendInt4 || c.send == sendInt8 // taken from the record
		switch {
		case c.send == sendTime:
			err = c.checkTime(r.Time)
		case direct:
		case c.send == sendJSON && c.field.Kind == plan.FieldHeaders:
			// Into the arena: one allocation per batch, not per row.
			if cap(rows.arena)-len(rows.arena) < 64+len(r.Headers)*48 {
				rows.arena = make([]byte, 0, max(64<<10, 2*(64+len(r.Headers)*48)))
			}
			start := len(rows.arena)
			rows.arena = encode.AppendHeadersJSONB(rows.arena, r.Headers)
			cells[i] = cell{bytes: rows.arena[start:len(rows.arena):len(rows.arena)]}
		default:
			cells[i], err = c.cellOf(r, key, &cs, vj)
		}
		if err == nil && i == ver && needVersion && !direct && cells[i].null {
			err = fmt.Errorf("version %s: the record has no value for it, so it cannot be ordered against the stored row", c.fieldSpec())
		}
		if err != nil {
			return err
		}
	}
	rows.recs = append(rows.recs, r)
	for i := range rows.cols {
		a := &rows.vals[i]
		switch a.kind {
		case sendText:
			a.text = append(a.text, pgtype.Text{String: cells[i].text, Valid: !cells[i].null})
		case sendBytes, sendJSON, sendJSONText:
			a.bytes = append(a.bytes, cells[i].bytes)
		case sendTime:
			a.times = append(a.times, r.Time)
		case sendInt4:
			a.i4 = append(a.i4, r.Partition)
		case sendInt8:
			if rows.cols[i].field.Kind == plan.FieldPartition {
				a.i8 = append(a.i8, int64(r.Partition))
			} else {
				a.i8 = append(a.i8, r.Offset)
			}
		}
	}
	return nil
}

// fieldSpec is the column's field as a plan writes it.
func (c pgColumn) fieldSpec() string {
	switch c.field.Kind {
	case plan.FieldOffset:
		return "offset"
	case plan.FieldTimestamp:
		return "timestamp"
	case plan.FieldHeader:
		return "header." + c.field.Arg
	}
	return fieldName(c.field) // value.<path>
}

func (rows *pgRows) len() int {
	if rows == nil {
		return 0
	}
	return len(rows.recs)
}

// args are the upsert's arguments, one array per column (colArray).
func (rows *pgRows) args() []any {
	out := make([]any, len(rows.vals))
	need := 0
	for i := len(rows.vals) - 1; i >= 0; i-- {
		a := &rows.vals[i]
		need += a.encodedSize()
		out[i] = colArray{vals: a, need: need}
	}
	return out
}

// encodedSize is about what the column's array takes in PostgreSQL's
// binary array format; more is harmless, less makes the buffer grow.
func (a *colVals) encodedSize() int {
	const header = 20 // flags, element type, dimensions, bounds
	switch a.kind {
	case sendBytes, sendJSON, sendJSONText:
		n := header
		for _, b := range a.bytes {
			n += 5 + len(b) // the length, jsonb's version byte, the bytes
		}
		return n
	case sendTime, sendInt8:
		return header + 12*max(len(a.times), len(a.i8))
	case sendInt4:
		return header + 8*len(a.i4)
	}
	n := header
	for _, t := range a.text {
		n += 4 + len(t.String)
	}
	return n
}

// slice returns rows lo to hi (not included), for finding a rejected row.
func (rows *pgRows) slice(lo, hi int) *pgRows {
	out := &pgRows{cols: rows.cols, recs: rows.recs[lo:hi], vals: make([]colVals, len(rows.vals))}
	for c, a := range rows.vals {
		out.vals[c] = colVals{kind: a.kind, text: cut(a.text, lo, hi), bytes: cut(a.bytes, lo, hi),
			times: cut(a.times, lo, hi), i4: cut(a.i4, lo, hi), i8: cut(a.i8, lo, hi)}
	}
	return out
}

// cut is s[lo:hi], nil for a nil s (a slice of another kind).
func cut[T any](s []T, lo, hi int) []T {
	if s == nil {
		return nil
	}
	return s[lo:hi]
}
