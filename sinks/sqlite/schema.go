package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

// statements are the sink's prepared statements (on its one connection).
type statements struct {
	// insert inserts a row, doing nothing when the key is there.
	insert *sql.Stmt
	// update rewrites a key's row when its contents differ (and, with a
	// version, when the record's is greater).
	update *sql.Stmt
	// lookup reads a stored row's provenance and how the record's version
	// compares with the row's (1 greater or no stored version, 0 equal, -1
	// smaller).
	lookup *sql.Stmt
	// delete deletes a key's row (with a version, unless the row's is
	// greater).
	delete *sql.Stmt
	// insertMany inserts chunkRows rows, doing nothing for a key that is
	// there; savepoint, release and rollbackTo bracket it.
	insertMany, savepoint, release, rollbackTo *sql.Stmt
	// insertShared is insertMany binding fewer values (see sharedChunk);
	// nil when the layout has nothing to share.
	insertShared *sql.Stmt
}

// each points at every statement, in the order prepareStatements
// prepares them.
func (st *statements) each() []**sql.Stmt {
	return []**sql.Stmt{&st.insert, &st.update, &st.lookup, &st.delete, &st.insertMany, &st.insertShared, &st.savepoint, &st.release, &st.rollbackTo}
}

func (st *statements) close() {
	for _, p := range st.each() {
		if *p != nil {
			_ = (*p).Close()
		}
	}
}

// prepare checks the database is in WAL mode, creates the table when
// cfg asks and it is missing, and prepares the statements on it.
func (s *Sink) prepare(ctx context.Context, cfg Config) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite sink: open %s: the database is in %s journal mode and cannot switch to WAL (is it on a network file system?)", s.path, mode)
	}
	schema, name := splitTable(s.table)
	types, strict, found, err := tableInfo(ctx, s.db, schema, name)
	if err != nil {
		return fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
	}
	if !found && cfg.CreateTable {
		if _, err := s.db.ExecContext(ctx, createTableSQL(s.table, s.cols, s.key)); err != nil {
			return fmt.Errorf("sqlite sink: create table %s: %w", s.name, err)
		}
		s.createdTable = true // kept should a later step of the open be retried
		if s.created == "" {
			s.created = fmt.Sprintf("the table %s did not exist in the database %s when this run opened it (create_table created it, empty)", s.name, absPath(s.path))
		}
		if types, strict, found, err = tableInfo(ctx, s.db, schema, name); err != nil {
			return fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
		}
	}
	if !found {
		return fmt.Errorf("sqlite sink: check table %s: no such table in %s: create it, or set create_table: true", s.name, absPath(s.path))
	}
	// A trigger of the table may skip a row (RAISE(IGNORE)): writeRow then
	// tells a skipped row from a stored one.
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+encode.QuoteIdent(schema)+`.sqlite_schema WHERE type = 'trigger' AND tbl_name = ?)`, name).Scan(&s.triggers); err != nil {
		return fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
	}
	if err := s.matchColumns(types, strict, len(cfg.Columns) == 0); err != nil {
		return err
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA encoding").Scan(&s.encoding); err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	s.utf16 = !strings.EqualFold(s.encoding, "UTF-8")
	s.shared = newSharedChunk(s.cols, !s.utf16, cfg.Mapped)
	if err := s.prepareStatements(ctx); err != nil {
		return err
	}
	if s.ckpt != nil {
		if err := s.ckpt.Prepare(ctx, s.db); err != nil {
			s.stmts.close()
			return fmt.Errorf("sqlite sink: checkpoint table %s: %w", s.ckpt.Name, err)
		}
	}
	return nil
}

// matchColumns gives each column of the layout its affinity from the
// table's declared types (lower-case names), or refuses a table that
// lacks a column: a default layout of an older version of replay
// (layoutError), or a mapping naming a column the table does not have.
func (s *Sink) matchColumns(types map[string]string, strict, defaultLayout bool) error {
	var missing []string
	var missingCols []column
	for i := range s.cols {
		c := &s.cols[i]
		t, ok := types[strings.ToLower(c.name)]
		if !ok {
			missing = append(missing, c.name)
			missingCols = append(missingCols, *c)
			continue
		}
		c.aff = affinityOf(t, strict)
	}
	if len(missing) == 0 {
		return nil
	}
	if defaultLayout {
		return fmt.Errorf("sqlite sink: %w", layoutError(s.name, missingCols))
	}
	have := slices.Sorted(maps.Keys(types))
	hint := "map fields only to columns the table has"
	if len(missing) == 1 && missing[0] == VersionColumn {
		hint = fmt.Sprintf("add it with ALTER TABLE %s ADD COLUMN %s", s.name, VersionColumn)
	}
	return fmt.Errorf("sqlite sink: table %s has no column %s (it has %s): %s", s.name, strings.Join(missing, ", "), strings.Join(have, ", "), hint)
}

// prepareStatements prepares the sink's statements. Preparing
// resolves the table, its columns and the ON CONFLICT target (which needs
// a unique key on the key column). On error none stays prepared.
func (s *Sink) prepareStatements(ctx context.Context) error {
	stmts := s.stmts.each()
	for i, q := range []string{s.insertSQL(1), s.updateSQL(), s.lookupSQL(), s.deleteSQL(), s.insertSQL(chunkRows),
		s.shared.insertSQL(s.table, s.cols, s.key, chunkRows), "SAVEPOINT replay_chunk", "RELEASE replay_chunk", "ROLLBACK TO replay_chunk"} {
		if q == "" {
			continue
		}
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			s.stmts.close()
			return fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
		}
		*stmts[i] = st
	}
	return nil
}

// insertSQL inserts n rows, the columns bound in order (plain ?, which
// binds faster than ?NNN); a conflict on a key does nothing (changes()
// tells).
func (s *Sink) insertSQL(n int) string {
	names := make([]string, len(s.cols))
	marks := make([]string, len(s.cols))
	for i, c := range s.cols {
		names[i], marks[i] = c.quoted, "?"
	}
	row := "(" + strings.Join(marks, ", ") + ")"
	return `INSERT INTO ` + s.table + ` (` + strings.Join(names, ", ") + `) VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + `
ON CONFLICT (` + s.cols[s.key].quoted + `) DO NOTHING`
}

// sharedChunk is how a multi-row INSERT binds fewer values than a
// parameter per cell: topic and partition (the same in every row) are
// bound once, and the default layout's value column, when every row's
// value is JSON, is CAST(<value_bytes parameter> AS TEXT) (in a UTF-8
// database, where that converts nothing).
type sharedChunk struct {
	consts []int // columns bound once per chunk, as ?1, ?2, ...
	perRow []int // columns bound per row, in order
	json   int   // the formJSONOnly column, -1 without one
	blob   int   // the column binding the value's raw bytes, for json
}

// newSharedChunk plans the shared statement for cols; nil when nothing
// would be shared. Under a mapping (mapped), value_bytes holds the bytes
// as read, not the mapped value: the value column is bound on its own.
func newSharedChunk(cols []column, utf8DB, mapped bool) *sharedChunk {
	sc := &sharedChunk{json: -1, blob: -1}
	for i, c := range cols {
		if c.form == formField && c.field.Kind == plan.FieldValue && c.aff == affBlob && sc.blob < 0 && !(mapped && c.original) {
			sc.blob = i
		}
	}
	for i, c := range cols {
		switch {
		case c.form == formJSONOnly && sc.json < 0 && sc.blob >= 0 && utf8DB:
			sc.json = i
		case c.form == formField && (c.field.Kind == plan.FieldTopic || c.field.Kind == plan.FieldPartition):
			sc.consts = append(sc.consts, i)
		default:
			sc.perRow = append(sc.perRow, i)
		}
	}
	if len(sc.consts) == 0 && sc.json < 0 {
		return nil
	}
	return sc
}

// insertSQL is the chunk's INSERT for n rows; "" for a nil sc. Every
// parameter is a plain ? in the order args binds them (a ?NNN parameter
// costs a lookup of its name, more than the binds it saves).
func (sc *sharedChunk) insertSQL(table string, cols []column, key, n int) string {
	if sc == nil {
		return ""
	}
	var names, sel []string
	for _, i := range sc.consts {
		names = append(names, cols[i].quoted)
		sel = append(sel, "?")
	}
	for j, i := range sc.perRow {
		names = append(names, cols[i].quoted)
		sel = append(sel, fmt.Sprintf("column%d", j+1))
	}
	if sc.json >= 0 {
		names = append(names, cols[sc.json].quoted)
		sel = append(sel, fmt.Sprintf("CAST(column%d AS TEXT)", slices.Index(sc.perRow, sc.blob)+1))
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(sc.perRow)), ", ") + ")"
	// WHERE true: an INSERT ... SELECT needs a WHERE before ON CONFLICT,
	// which SQLite would otherwise read as a join's constraint.
	return `INSERT INTO ` + table + ` (` + strings.Join(names, ", ") + `) SELECT ` + strings.Join(sel, ", ") +
		` FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + `) WHERE true
ON CONFLICT (` + cols[key].quoted + `) DO NOTHING`
}

// args appends rows' parameters for insertSQL to dst, and reports false
// (appending nothing) when the rows cannot share: a constant column that
// differs between them, or a value that is not JSON.
func (sc *sharedChunk) args(dst []any, rows []sqliteRow) ([]any, bool) {
	first := rows[0].args
	for r := range rows {
		a := rows[r].args
		if sc.json >= 0 && a[sc.json] == nil {
			return dst, false
		}
		for _, i := range sc.consts {
			if !sameCell(a[i], first[i]) {
				return dst, false
			}
		}
	}
	for _, i := range sc.consts {
		dst = append(dst, first[i])
	}
	for r := range rows {
		a := rows[r].args
		for _, i := range sc.perRow {
			dst = append(dst, a[i])
		}
	}
	return dst, true
}

// sameCell reports whether a and b are the same string or int64 cell
// (false for any other kind: a []byte cannot be compared with ==).
func sameCell(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	}
	return false
}

// updateSQL rewrites the key's row with the same parameters as insertSQL,
// only when a column differs, and with a version only for a greater one;
// "" when the table has no column besides the key or conflicts are
// ignored.
func (s *Sink) updateSQL() string {
	var set, old, new []string
	for i, c := range s.cols {
		if i != s.key {
			set = append(set, fmt.Sprintf("%s = ?%d", c.quoted, i+1))
			old = append(old, c.quoted)
			new = append(new, fmt.Sprintf("?%d", i+1))
		}
	}
	if len(set) == 0 || s.ignore {
		return ""
	}
	q := `UPDATE ` + s.table + ` SET ` + strings.Join(set, ", ") + `
WHERE ` + s.cols[s.key].quoted + fmt.Sprintf(" = ?%d", s.key+1) + ` AND (` + strings.Join(old, ", ") + `) IS NOT (` + strings.Join(new, ", ") + `)`
	if s.version >= 0 {
		v := s.cols[s.version].quoted
		q += fmt.Sprintf(` AND (%s IS NULL OR ?%d > %s)`, v, s.version+1, v)
	}
	return q
}

// lookupSQL reads, for the key ?1, the row's topic, partition and offset
// (NULL for a column the layout lacks) and how the version ?2 (with a
// version only) compares with the row's.
func (s *Sink) lookupSQL() string {
	sel := make([]string, 0, 4)
	for _, i := range s.prov {
		if i < 0 {
			sel = append(sel, "NULL")
		} else {
			sel = append(sel, s.cols[i].quoted)
		}
	}
	cmp := "1"
	if s.version >= 0 {
		v := s.cols[s.version].quoted
		cmp = fmt.Sprintf("CASE WHEN %s IS NULL OR ?2 > %s THEN 1 WHEN ?2 = %s THEN 0 ELSE -1 END", v, v, v)
	}
	return `SELECT ` + strings.Join(append(sel, cmp), ", ") + ` FROM ` + s.table + ` WHERE ` + s.cols[s.key].quoted + ` = ?1`
}

// deleteSQL deletes the key ?1's row; with a version, bound as ?2 (NULL:
// the tombstone has none), not a row whose version is greater.
func (s *Sink) deleteSQL() string {
	if s.tombstone != "delete" {
		return ""
	}
	q := `DELETE FROM ` + s.table + ` WHERE ` + s.cols[s.key].quoted + ` = ?1`
	if s.version >= 0 {
		v := s.cols[s.version].quoted
		return q + fmt.Sprintf(` AND (%s IS NULL OR ?2 IS NULL OR ?2 >= %s)`, v, v)
	}
	return q
}
