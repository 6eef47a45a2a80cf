package postgres

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// The statements of the postgres sink and the batches they take.

// pgParamType is the type a column's values are sent as; JSON is sent as
// text and cast to the column's type (jsonb in a created table).
func pgParamType(c encode.Column) string {
	switch c.Field.Kind {
	case plan.FieldTimestamp:
		return "timestamptz"
	case plan.FieldPartition:
		return "int"
	case plan.FieldOffset:
		return "bigint"
	}
	return "text"
}

// createTableSQL creates the table with a column per field, typed after the
// field; the key column is the primary key. For the default layout it is
// the DDL of the first versions.
func createTableSQL(table string, cols []encode.Column, key int) string {
	var b strings.Builder
	b.WriteString(`CREATE TABLE IF NOT EXISTS ` + table + ` (`)
	for i, c := range cols {
		if i > 0 {
			b.WriteString(",")
		}
		typ := pgParamType(c)
		if c.IsJSON() {
			typ = "jsonb"
		}
		b.WriteString("\n\t" + pgx.Identifier{c.Name}.Sanitize() + " " + typ)
		switch {
		case i == key:
			b.WriteString(" PRIMARY KEY")
		case c.NotNull():
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString("\n)")
	return b.String()
}

// copyTable is the temporary table a large batch is copied into; it lives
// until the end of the batch's transaction.
const copyTable = "replay_batch"

// upsertSQL returns the statements that write a batch: upsert, one
// statement over arrays (one element per row, so a batch is one round
// trip); and the COPY path: createTemp makes a temporary table of the
// values as sent, copyCols are its columns, and fromTemp upserts from it.
// Each value is cast to its column's declared type.
//
// The rows must have distinct keys: ON CONFLICT DO UPDATE fails on a key
// it meets twice. An update that would change nothing is skipped, so a
// re-delivery does not rewrite (and bloat) identical rows.
func upsertSQL(table string, cols []encode.Column, types []string, key int, ignore bool) (upsert, createTemp, fromTemp string, copyCols []string) {
	names := make([]string, len(cols))
	sel := make([]string, len(cols))
	params := make([]string, len(cols))
	temp := make([]string, len(cols))
	copyCols = make([]string, len(cols))
	for i, c := range cols {
		u := "c" + strconv.Itoa(i+1)
		names[i] = pgx.Identifier{c.Name}.Sanitize()
		sel[i] = u + "::" + types[i]
		params[i] = fmt.Sprintf("$%d::%s[]", i+1, pgParamType(c))
		temp[i] = u + " " + pgParamType(c)
		copyCols[i] = u
	}
	insert := `INSERT INTO ` + table + ` AS t (` + strings.Join(names, ", ") + `)
SELECT ` + strings.Join(sel, ", ")
	conflict := "\n" + onConflictSQL(names, key, ignore)
	upsert = insert + `
FROM unnest(` + strings.Join(params, ", ") + `) AS u(` + strings.Join(copyCols, ", ") + `)` + conflict
	createTemp = `CREATE TEMP TABLE ` + copyTable + ` (` + strings.Join(temp, ", ") + `) ON COMMIT DROP`
	fromTemp = insert + `
FROM pg_temp.` + copyTable + conflict
	return upsert, createTemp, fromTemp, copyCols
}

func onConflictSQL(names []string, key int, ignore bool) string {
	q := `ON CONFLICT (` + names[key] + `) DO `
	var set, old, new []string
	for i, n := range names {
		if i == key {
			continue
		}
		set = append(set, n+" = excluded."+n)
		old = append(old, "t."+n)
		new = append(new, "excluded."+n)
	}
	if ignore || len(set) == 0 {
		return q + `NOTHING`
	}
	return q + `UPDATE SET ` + strings.Join(set, ", ") + `
WHERE (` + strings.Join(old, ", ") + `)
	IS DISTINCT FROM (` + strings.Join(new, ", ") + `)`
}

// pgRows holds a batch as the upsert's column arrays, one row per key.
type pgRows struct {
	cols []encode.Column
	recs []*record.Record // the record of each row
	vals []pgArray        // one per column
}

// pgArray holds one column's values in the slice of its field's kind:
// times for timestamp, ints for partition, bigs for offset, text for the
// others.
type pgArray struct {
	kind  plan.FieldKind
	text  []pgtype.Text
	times []time.Time
	ints  []int32
	bigs  []int64
}

func (s *Sink) newRows(n int) *pgRows {
	r := &pgRows{cols: s.cols, recs: make([]*record.Record, 0, n), vals: make([]pgArray, len(s.cols))}
	for i, c := range s.cols {
		a := &r.vals[i]
		a.kind = c.Field.Kind
		switch a.kind {
		case plan.FieldTimestamp:
			a.times = make([]time.Time, 0, n)
		case plan.FieldPartition:
			a.ints = make([]int32, 0, n)
		case plan.FieldOffset:
			a.bigs = make([]int64, 0, n)
		default:
			a.text = make([]pgtype.Text, 0, n)
		}
	}
	return r
}

// add appends the row of r, whose idempotency key is key.
func (rows *pgRows) add(r *record.Record, key string) {
	rows.recs = append(rows.recs, r)
	cs := encode.Cells{Record: r, Key: key}
	for i, c := range rows.cols {
		a := &rows.vals[i]
		switch c.Field.Kind {
		case plan.FieldTimestamp:
			a.times = append(a.times, r.Time)
		case plan.FieldPartition:
			a.ints = append(a.ints, r.Partition)
		case plan.FieldOffset:
			a.bigs = append(a.bigs, r.Offset)
		default:
			v, ok := cs.Text(c)
			a.text = append(a.text, pgtype.Text{String: v, Valid: ok})
		}
	}
}

func (rows *pgRows) args() []any {
	out := make([]any, len(rows.vals))
	for i := range rows.vals {
		out[i] = rows.vals[i].arg()
	}
	return out
}

// arg is the column's array. Empty slices, not nil ones: pgx sends a nil
// slice as NULL, and unnest(NULL) in EXPLAIN would not check the types.
func (a *pgArray) arg() any {
	switch a.kind {
	case plan.FieldTimestamp:
		return nonNil(a.times)
	case plan.FieldPartition:
		return nonNil(a.ints)
	case plan.FieldOffset:
		return nonNil(a.bigs)
	}
	return nonNil(a.text)
}

// value is row i's value as CopyFrom takes it.
func (a *pgArray) value(i int) any {
	switch a.kind {
	case plan.FieldTimestamp:
		return a.times[i]
	case plan.FieldPartition:
		return a.ints[i]
	case plan.FieldOffset:
		return a.bigs[i]
	}
	if !a.text[i].Valid {
		return nil
	}
	return a.text[i].String
}

func (rows *pgRows) copySource() pgx.CopyFromSource {
	i := -1
	return pgx.CopyFromFunc(func() ([]any, error) {
		i++
		if i >= len(rows.recs) {
			return nil, nil
		}
		row := make([]any, len(rows.vals))
		for c := range rows.vals {
			row[c] = rows.vals[c].value(i)
		}
		return row, nil
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// rows computes the keys of batch and resolves duplicate keys: with update
// the last record of a key replaces the earlier ones, with ignore the first
// one stays.
func (s *Sink) rows(batch []record.Record) (*pgRows, error) {
	keys := make([]string, len(batch))
	winner := make(map[string]int, len(batch)) // key → index in batch
	order := make([]int, 0, len(batch))        // first index of each key
	for i := range batch {
		key, err := s.keyer.Key(&batch[i])
		if err != nil {
			return nil, err
		}
		keys[i] = key
		if _, dup := winner[key]; !dup {
			order = append(order, i)
		} else if s.ignore {
			continue
		}
		winner[key] = i
	}
	rows := s.newRows(len(order))
	for _, first := range order {
		i := winner[keys[first]]
		rows.add(&batch[i], keys[i])
	}
	return rows, nil
}

// one returns row i alone, for probing.
func (rows *pgRows) one(i int) *pgRows {
	out := &pgRows{cols: rows.cols, recs: rows.recs[i : i+1], vals: make([]pgArray, len(rows.vals))}
	for c, a := range rows.vals {
		o := &out.vals[c]
		o.kind = a.kind
		switch a.kind {
		case plan.FieldTimestamp:
			o.times = a.times[i : i+1]
		case plan.FieldPartition:
			o.ints = a.ints[i : i+1]
		case plan.FieldOffset:
			o.bigs = a.bigs[i : i+1]
		default:
			o.text = a.text[i : i+1]
		}
	}
	return out
}
