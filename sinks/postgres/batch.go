package postgres

import (
	"fmt"
	"strconv"
	"strings"
)

// The statements of the postgres sink and the batches they take.

// createTableSQL creates the table with a column per field, typed after the
// field; the key column is the primary key. A text key is COLLATE "C"
// (byte order, as Kafka compares keys): a locale's order cost about a
// third more on a bulk load.
func createTableSQL(table string, cols []pgColumn, key int) string {
	defs := make([]string, len(cols))
	for i, c := range cols {
		typ := c.createType()
		defs[i] = c.quoted() + " " + typ
		switch {
		case i == key && typ == "text":
			defs[i] += ` COLLATE "C" PRIMARY KEY`
		case i == key:
			defs[i] += " PRIMARY KEY"
		case c.notNull():
			defs[i] += " NOT NULL"
		}
	}
	return `CREATE TABLE IF NOT EXISTS ` + table + " (\n\t" + strings.Join(defs, ",\n\t") + "\n)"
}

// copyTable is the temporary table a large batch is copied into; each
// connection creates it once (ON COMMIT DELETE ROWS empties it at the end
// of every transaction).
const copyTable = "replay_batch"

// statements are the SQL of one sink, built once at open.
type statements struct {
	// upsert reads the rows from arrays ($1..$n, one per column), copyUpsert
	// from the COPY table; both return one row of counts (queueUpsert).
	upsert, copyUpsert string
	// upsertSame and copyUpsertSame leave out, before the INSERT, the
	// rows identical to the stored ones, with the same counts: ON CONFLICT
	// DO UPDATE locks (writes) every conflicting row even when nothing
	// changes, where the NOT EXISTS probe costs an index lookup per row.
	// "" for on_conflict: ignore (DO NOTHING locks nothing).
	upsertSame, copyUpsertSame string
	// remove deletes the keys of $1 (with their versions in $2) and
	// returns the counts of queueDelete.
	remove string
	// createTemp creates the COPY table; copyCols are its columns.
	createTemp string
	copyCols   []string
	// copyTemp copies a binary stream of rows into the COPY table,
	// copyInto into the table itself (copyReader).
	copyTemp, copyInto string
	// insert and copyInsert insert the rows of arrays ($1..$n) or of the
	// COPY table without ON CONFLICT (freshShard, not direct).
	insert, copyInsert string
	// imageCheck runs the binary comparison of upsertSame once
	// (imageCheckSQL); "" when the statements compare as text.
	imageCheck string
}

// sqlShape is what the statements need to know of the sink.
type sqlShape struct {
	table  string
	cols   []pgColumn
	key    int
	ver    int    // the version column, -1 without
	prov   [3]int // topic, partition, offset columns; -1 when not mapped
	ignore bool
	// exactBytes: the layout stores the value's exact bytes in a column of
	// its own (the default layout's value_bytes), so its jsonb columns
	// need no comparison as text (sameText).
	exactBytes bool
	// triggers: the table has triggers of its own, one of which may skip
	// a row (a BEFORE trigger returning NULL): the statements then count
	// the rows neither written nor stored before (skippedSQL).
	triggers bool
	// image: sameSQL compares the stored cells with the incoming ones by
	// their binary images (imageSame), which prepare checked the table's
	// types allow (statements.imageCheck).
	image bool
}

// keyProbe ends every subquery that looks a batch's keys up in the
// table: OFFSET 0 keeps PostgreSQL from flattening it into a join, so each
// key is one probe of the unique index. Flattened, the planner (guessing
// the COPY table's size, which has no statistics) may hash the whole
// table: 35 ms per 1000-row batch on a 20,000-row table instead of 4.
const keyProbe = " OFFSET 0"

// probeKey is expr (the batch's key) as the lookups compare it with the
// key column: cast to bpchar (no length: nothing is cut) for a
// character(n) column, whose index cannot answer text = character (each
// lookup would read the whole table).
func (sh sqlShape) probeKey(expr string) string {
	if sh.cols[sh.key].decl.base == "bpchar" {
		return expr + "::pg_catalog.bpchar"
	}
	return expr
}

// skippedSQL is the upsert's seventh count: the rows of from (alias s) that
// the INSERT neither inserted nor updated and whose key had no row before
// the statement (its snapshot does not see its own writes): a trigger
// skipped them. 0 for a table without triggers of its own.
func (sh sqlShape) skippedSQL(from, key, keyExpr string) string {
	if !sh.triggers {
		return "0::bigint"
	}
	return "(SELECT count(*) FROM " + from + " s WHERE NOT EXISTS (SELECT 1 FROM ins i WHERE i.k = " + keyExpr + ") AND NOT EXISTS (SELECT 1 FROM " + sh.table + " o WHERE o." + key + " = " + sh.probeKey(keyExpr) + keyProbe + "))"
}

// sameText reports whether the column's values are compared as text to
// tell a changed row: the equality of numeric, float, jsonb and citext is
// not identity (1.0 = 1.00, 'A' = 'a'): a cell differing only so would be
// counted unchanged and leave the old text. json has no equality at all.
func (sh sqlShape) sameText(c pgColumn) bool {
	switch c.decl.base {
	case "numeric", "float4", "float8", "json", "citext":
		return true
	case "jsonb":
		return !sh.exactBytes || c.decoded
	}
	return false
}

// compared returns the non-key columns of a row as its change test
// compares them: old (alias.name, or its text) and the incoming values
// (newOf(i), or their text). The default layout's value column is left
// out, a function of value_bytes, which is compared (jsonb equality walks
// both documents, the most costly part of the test on a re-run); a
// decoded value is compared, as text, since it depends on decode: too.
func (sh sqlShape) compared(names []string, alias string, newOf func(i int) string) (old, new []string) {
	for i, n := range names {
		if i == sh.key || sh.exactBytes && sh.cols[i].jsonOrNull && !sh.cols[i].decoded {
			continue
		}
		o, v := alias+"."+n, newOf(i)
		if sh.sameText(sh.cols[i]) {
			o, v = "("+o+")::text", "("+v+")::text"
		}
		old, new = append(old, o), append(new, v)
	}
	return old, new
}

func (sh sqlShape) hasProv() bool { return sh.prov[0] >= 0 && sh.prov[1] >= 0 && sh.prov[2] >= 0 }

func (sh sqlShape) build() statements {
	var st statements
	n := len(sh.cols)
	names := make([]string, n)
	params := make([]string, n)
	temp := make([]string, n)
	st.copyCols = make([]string, n)
	for i, c := range sh.cols {
		u := "c" + strconv.Itoa(i+1)
		names[i] = c.quoted()
		params[i] = fmt.Sprintf("$%d::%s[]", i+1, c.send.sql())
		temp[i] = u + " " + c.send.sql()
		st.copyCols[i] = u
	}
	st.createTemp = `CREATE TEMP TABLE IF NOT EXISTS ` + copyTable + ` (` + strings.Join(temp, ", ") + `) ON COMMIT DELETE ROWS`
	st.copyTemp = copySQL("pg_temp."+copyTable, st.copyCols)
	st.copyInto = copySQL(sh.table, names)
	arrays := `SELECT * FROM unnest(` + strings.Join(params, ", ") + `) AS u(` + strings.Join(st.copyCols, ", ") + `)`
	exprs := make([]string, n)
	for i, c := range sh.cols {
		exprs[i] = c.expr("s", i)
	}
	insert := "INSERT INTO " + sh.table + " (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(exprs, ", ")
	st.insert = insert + " FROM (" + arrays + ") s"
	st.copyInsert = insert + " FROM pg_temp." + copyTable + " s"
	st.upsert = sh.upsertSQL(arrays, names, exprs, false)
	st.copyUpsert = sh.upsertSQL("", names, exprs, false)
	if !sh.ignore {
		st.upsertSame = sh.upsertSQL(arrays, names, exprs, true)
		st.copyUpsertSame = sh.upsertSQL("", names, exprs, true)
		if sh.image {
			st.imageCheck = sh.imageCheckSQL(names, exprs)
		}
	}
	st.remove = sh.removeSQL()
	return st
}

// upsertSQL is the upsert of the rows src selects (the COPY table when
// src is ""), as one statement that returns what it did: inserted,
// updated, stale, duplicate, key collisions, the first collision, and the
// rows a trigger skipped. The rows must have distinct keys (ON CONFLICT
// DO UPDATE fails on a key it meets twice). An update that would change
// nothing is skipped, so a re-delivery does not rewrite (and bloat)
// identical rows; with a version column, only a greater version updates.
// The old rows are read in the same statement (one snapshot). skipSame
// leaves out the rows identical to the stored ones before the INSERT
// (statements.upsertSame). exprs are the columns' values in a row s.
func (sh sqlShape) upsertSQL(src string, names, exprs []string, skipSame bool) string {
	key := names[sh.key]
	same := ""
	if skipSame {
		same = sh.sameSQL(names, exprs)
	}
	if sh.ver < 0 && !sh.ignore {
		return sh.plainUpsertSQL(src, names, exprs, same)
	}
	withOld := sh.ver >= 0 && !sh.ignore || sh.hasProv()
	var b strings.Builder
	from := withSource(&b, src)
	if withOld {
		// The stored row of each distinct key (as the column compares
		// them), only the columns read (a role may hold SELECT on those).
		cols := []string{"t." + key + " AS k"}
		if sh.ver >= 0 {
			cols = append(cols, "t."+names[sh.ver]+" AS v")
		}
		if sh.hasProv() {
			cols = append(cols, "t."+names[sh.prov[0]]+" AS tp", "t."+names[sh.prov[1]]+" AS pa", "t."+names[sh.prov[2]]+" AS os")
		}
		b.WriteString("old AS (SELECT t.* FROM (SELECT DISTINCT " + sh.probeKey(exprs[sh.key]) + " AS k FROM " + from + " s) d CROSS JOIN LATERAL (SELECT " +
			strings.Join(cols, ", ") + " FROM " + sh.table + " t WHERE t." + key + " = d.k" + keyProbe + ") t),\n")
	}
	b.WriteString("ins AS (INSERT INTO " + sh.table + " AS t (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(exprs, ", ") + " FROM " + from + " s" + same + "\n")
	b.WriteString(sh.onConflictSQL(names))
	b.WriteString("\nRETURNING t." + key + " AS k, (t.xmax = 0) AS fresh)\n")
	zero := "0::bigint"
	stale, dup, coll, first := zero, zero, zero, "NULL::text"
	if sh.ver >= 0 && !sh.ignore {
		v := exprs[sh.ver]
		stale = "count(*) FILTER (WHERE i.k IS NULL AND o.v > " + v + ")"
		dup = "count(*) FILTER (WHERE i.k IS NULL AND o.v = " + v + ")"
	}
	if sh.hasProv() {
		tp, pa, os := exprs[sh.prov[0]], exprs[sh.prov[1]], exprs[sh.prov[2]]
		collides := "o.k IS NOT NULL AND (o.tp, o.pa) IS DISTINCT FROM (" + tp + ", " + pa + ")"
		coll = "count(*) FILTER (WHERE " + collides + ")"
		first = "(array_agg(o.tp || '/' || o.pa || '/' || o.os || ' and ' || " + tp + " || '/' || " + pa + " || '/' || " + os +
			" || ': key ' || " + exprs[sh.key] + " ORDER BY " + os + ") FILTER (WHERE " + collides + "))[1]"
	}
	b.WriteString("SELECT count(i.k) FILTER (WHERE i.fresh), count(i.k) FILTER (WHERE NOT i.fresh), " + stale + ", " + dup + ", " + coll + ", " + first +
		", " + sh.skippedSQL(from, key, exprs[sh.key]) + "\nFROM " + from + " s LEFT JOIN ins i ON i.k = " + exprs[sh.key])
	if withOld {
		b.WriteString(" LEFT JOIN old o ON o.k = " + exprs[sh.key])
	}
	return b.String()
}

// withSource writes the start of a statement's WITH: the rows' source src
// as a query named src, or none when they are in the COPY table; it
// returns the relation that holds them.
func withSource(b *strings.Builder, src string) string {
	if src == "" {
		b.WriteString("WITH ")
		return "pg_temp." + copyTable
	}
	b.WriteString("WITH src AS (" + src + "),\n")
	return "src"
}

// plainUpsertSQL is upsertSQL for on_conflict: update without a version:
// only the updated rows need their old provenance (an unchanged row has
// the same topic and partition), so a fresh load and a re-run read none.
func (sh sqlShape) plainUpsertSQL(src string, names, exprs []string, same string) string {
	key := names[sh.key]
	var b strings.Builder
	from := withSource(&b, src)
	b.WriteString("ins AS (INSERT INTO " + sh.table + " AS t (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(exprs, ", ") + " FROM " + from + " s" + same + "\n")
	b.WriteString(sh.onConflictSQL(names))
	b.WriteString("\nRETURNING t." + key + " AS k, (t.xmax = 0) AS fresh")
	if !sh.hasProv() {
		b.WriteString(")\nSELECT count(*) FILTER (WHERE fresh), count(*) FILTER (WHERE NOT fresh), 0::bigint, 0::bigint, 0::bigint, NULL::text, " + sh.skippedSQL(from, key, exprs[sh.key]) + " FROM ins")
		return b.String()
	}
	tp, pa, os := names[sh.prov[0]], names[sh.prov[1]], names[sh.prov[2]]
	b.WriteString(", t." + tp + " AS tp, t." + pa + " AS pa, t." + os + " AS os),\n")
	b.WriteString("old AS (SELECT t.* FROM ins i CROSS JOIN LATERAL (SELECT t." + key + " AS k, t." + tp + " AS tp, t." + pa + " AS pa, t." + os + " AS os FROM " + sh.table + " t WHERE t." + key + " = i.k" + keyProbe + ") t WHERE NOT i.fresh),\n")
	b.WriteString("coll AS (SELECT o.tp || '/' || o.pa || '/' || o.os || ' and ' || i.tp || '/' || i.pa || '/' || i.os || ': key ' || i.k AS pair, i.os FROM old o JOIN ins i ON i.k = o.k WHERE (o.tp, o.pa) IS DISTINCT FROM (i.tp, i.pa))\n")
	b.WriteString("SELECT (SELECT count(*) FILTER (WHERE fresh) FROM ins), (SELECT count(*) FILTER (WHERE NOT fresh) FROM ins), 0::bigint, 0::bigint, (SELECT count(*) FROM coll), (SELECT pair FROM coll ORDER BY os LIMIT 1), " +
		sh.skippedSQL(from, key, exprs[sh.key]))
	return b.String()
}

// sameSQL is the WHERE clause that leaves out of the INSERT's SELECT the
// rows of s the upsert would not change: identical to the stored row of
// their key, or, with a version, not newer than it (the test of
// onConflictSQL's WHERE, made before the INSERT, without a row lock).
func (sh sqlShape) sameSQL(names, exprs []string) string {
	old, new := sh.compared(names, "o", func(i int) string { return exprs[i] })
	if len(old) == 0 {
		return ""
	}
	same := "(" + strings.Join(old, ", ") + ") IS NOT DISTINCT FROM (" + strings.Join(new, ", ") + ")"
	if sh.image {
		same = sh.imageSame(names, "o", exprs)
	}
	if sh.ver >= 0 {
		// A row whose stored version is not smaller stays as it is
		// (stale or duplicate: onConflictSQL's WHERE), whatever it holds.
		v := names[sh.ver]
		same = "(" + same + " OR (o." + v + " IS NOT NULL AND " + exprs[sh.ver] + " IS NOT NULL AND o." + v + " >= " + exprs[sh.ver] + "))"
	}
	return " WHERE NOT EXISTS (SELECT 1 FROM " + sh.table + " o WHERE o." + names[sh.key] + " = " + sh.probeKey(exprs[sh.key]) + " AND " + same + keyProbe + ")"
}

// imageSame is the test of sameSQL by binary images: the stored row's
// compared cells (alias.name) and the incoming ones (exprs) as two
// records, equal under record_image_eq when every cell has the same
// bytes. Equal images print the same text; cells of the same text with
// other bytes go on to the upsert, whose WHERE decides. It costs a memcmp
// per cell where the text test prints both values.
func (sh sqlShape) imageSame(names []string, alias string, exprs []string) string {
	var old, new []string
	for i, n := range names {
		if i == sh.key || sh.exactBytes && sh.cols[i].jsonOrNull && !sh.cols[i].decoded {
			continue
		}
		old = append(old, alias+"."+n)
		new = append(new, sh.imageExpr(i, exprs[i]))
	}
	return "pg_catalog.record_image_eq(ROW(" + strings.Join(old, ", ") + "), ROW(" + strings.Join(new, ", ") + "))"
}

// imageExpr is expr, column i's incoming value, in exactly the column's
// type, as record_image_eq requires: cast to a domain, or to varchar or
// bpchar without a length (which cannot cut it).
func (sh sqlShape) imageExpr(i int, expr string) string {
	d := sh.cols[i].decl
	switch {
	case d.domain:
		return "(" + expr + ")::" + d.sql
	case d.base == "varchar" || d.base == "bpchar":
		return "(" + expr + ")::pg_catalog." + d.base
	}
	return expr
}

// imageCheckSQL runs imageSame once, on a row of NULLs of the columns'
// declared types and one of the sent types: record_image_eq fails on
// cells of different types, which EXPLAIN does not see.
func (sh sqlShape) imageCheckSQL(names, exprs []string) string {
	stored := make([]string, len(sh.cols))
	sent := make([]string, len(sh.cols))
	for i, c := range sh.cols {
		stored[i] = "NULL::" + c.decl.sql + " AS " + names[i]
		sent[i] = "NULL::" + c.send.sql() + " AS c" + strconv.Itoa(i+1)
	}
	return "SELECT " + sh.imageSame(names, "o", exprs) + " FROM (SELECT " + strings.Join(stored, ", ") + ") o, (SELECT " + strings.Join(sent, ", ") + ") s"
}

func (sh sqlShape) onConflictSQL(names []string) string {
	q := `ON CONFLICT (` + names[sh.key] + `) DO `
	var set []string
	for i, n := range names {
		if i != sh.key {
			set = append(set, n+" = excluded."+n)
		}
	}
	old, new := sh.compared(names, "t", func(i int) string { return "excluded." + names[i] })
	if sh.ignore || len(set) == 0 {
		return q + `NOTHING`
	}
	where := ""
	if sh.ver >= 0 {
		v := names[sh.ver]
		where = "(t." + v + " IS NULL OR excluded." + v + " IS NULL OR t." + v + " < excluded." + v + ") AND "
	}
	return q + `UPDATE SET ` + strings.Join(set, ", ") + `
WHERE ` + where + `(` + strings.Join(old, ", ") + `) IS DISTINCT FROM (` + strings.Join(new, ", ") + `)`
}

// removeSQL deletes the rows of the keys in $1; with a version column, a
// row whose stored version is not smaller than the tombstone's ($2) stays
// (stale or duplicate), and a tombstone without a version deletes. It
// returns deleted, stale, duplicate.
func (sh sqlShape) removeSQL() string {
	kc := sh.cols[sh.key]
	key := kc.quoted()
	d := "SELECT * FROM unnest($1::" + kc.send.sql() + "[]) AS d(c" + strconv.Itoa(sh.key+1) + ")"
	if sh.ver >= 0 {
		vc := sh.cols[sh.ver]
		d = "SELECT * FROM unnest($1::" + kc.send.sql() + "[], $2::" + vc.send.sql() + "[]) AS d(c" + strconv.Itoa(sh.key+1) + ", c" + strconv.Itoa(sh.ver+1) + ")"
	}
	k := kc.expr("d", sh.key)
	if sh.ver < 0 {
		return "WITH d AS (" + d + "),\ndel AS (DELETE FROM " + sh.table + " t USING d WHERE t." + key + " = " + k + " RETURNING 1)\nSELECT count(*), 0::bigint, 0::bigint FROM del"
	}
	vn := sh.cols[sh.ver].quoted()
	v := sh.cols[sh.ver].expr("d", sh.ver)
	return "WITH d AS (" + d + "),\nold AS (SELECT t." + key + " AS k, t." + vn + " AS v FROM " + sh.table + " t WHERE t." + key + " IN (SELECT " + k + " FROM d)),\n" +
		"del AS (DELETE FROM " + sh.table + " t USING d WHERE t." + key + " = " + k + " AND (" + v + " IS NULL OR t." + vn + " IS NULL OR t." + vn + " < " + v + ") RETURNING t." + key + " AS k)\n" +
		"SELECT count(x.k), count(*) FILTER (WHERE x.k IS NULL AND o.v > " + v + "), count(*) FILTER (WHERE x.k IS NULL AND o.v = " + v + ")\n" +
		"FROM d LEFT JOIN del x ON x.k = " + k + " LEFT JOIN old o ON o.k = " + k
}
