package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// op is what a record does to the table.
type op uint8

const (
	opUpsert op = iota
	opDelete
	opSkip
)

// sqliteRow is one record's statement.
type sqliteRow struct {
	rec  *record.Record
	op   op
	key  string
	args []any
}

// Write writes batch in one transaction, in order: upserts, and deletes
// of tombstones with on_tombstone delete. A key template failing on a
// record returns its *record.Error and writes nothing; so does a value the
// target column would change (ErrChanged), a record without a version
// (ErrNoVersion), and a row the database rejects (a constraint of a table
// made by hand, a STRICT column's type, a value too big). Any other failure
// is a plain error, and nothing is written. The outcomes are counted once
// the transaction is committed.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, err)
	}
	rows, err := s.rows(batch)
	if err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, ctx.Err())
	}
	out, err := s.writeRows(ctx, rows, batch)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.out.Add(out)
	s.mu.Unlock()
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows)).Msg("upserted")
	return nil
}

func (s *Sink) rows(batch []record.Record) ([]sqliteRow, error) {
	rows := make([]sqliteRow, len(batch))
	args := make([]any, len(batch)*len(s.cols))
	var a arena
	for i := range batch {
		r := &batch[i]
		key, err := s.keyer.Key(r)
		if err != nil {
			return nil, err
		}
		row := sqliteRow{rec: r, key: key}
		if r.Value == nil {
			switch s.tombstone {
			case plan.OnTombstoneSkip:
				row.op = opSkip
			case plan.OnTombstoneDelete:
				row.op = opDelete
			}
		}
		if row.op != opSkip {
			row.args = args[i*len(s.cols) : (i+1)*len(s.cols)] // capacity to the end: insertChunk takes consecutive rows
			if err := s.values(r, key, row.args, &a); err != nil {
				return nil, err
			}
			if s.version >= 0 && row.op == opUpsert && row.args[s.version] == nil {
				return nil, record.NewError(r, fmt.Errorf("sqlite sink: version %s: the record has none (missing or null), so its update cannot be ordered: %w", s.cols[s.version].field.Arg, ErrNoVersion))
			}
		}
		rows[i] = row
	}
	return rows, nil
}

// values fills out with r's cells, in column order.
func (s *Sink) values(r *record.Record, key string, out []any, a *arena) error {
	for i := range s.cols {
		v, err := cell(&s.cols[i], r, key, a)
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

// writeRows runs rows' statements in one transaction and returns what
// they did.
func (s *Sink) writeRows(ctx context.Context, rows []sqliteRow, batch []record.Record) (out sinks.Outcomes, err error) {
	fail := func(what string, err error) (sinks.Outcomes, error) {
		return sinks.Outcomes{}, sqliteTransient(fmt.Errorf("sqlite sink: %s %s: %w", what, s.name, s.ctxErr(ctx, err)))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail("upsert into", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	st := s.txStatements(ctx, tx)
	// The statements run without the context's cancellation: the driver
	// would start a goroutine watching it for each one. The transaction
	// still ends with the context (database/sql rolls it back), and the
	// loop checks it every few hundred rows.
	rctx := context.WithoutCancel(ctx)
	fast := st.insertMany != nil
	for i := 0; i < len(rows); i++ {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fail("upsert into", err)
			}
		}
		if fast {
			if n := s.chunk(rows[i:]); n > 0 {
				ok, err := s.insertChunk(rctx, &st, rows[i:i+n])
				if err != nil {
					return fail("upsert into", err)
				}
				if ok {
					out.Inserted += int64(n)
					i += n - 1
					continue
				}
				// A key of the chunk has a row (a re-run): the rest of the
				// batch goes row by row.
				fast = false
			}
		}
		row := &rows[i]
		if err := s.writeRow(rctx, &st, row, &out); err != nil {
			err = fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err))
			if sqliteRejectsData(err) {
				return sinks.Outcomes{}, record.NewError(row.rec, err)
			}
			return sinks.Outcomes{}, sqliteTransient(err)
		}
	}
	if s.ckpt != nil {
		if err := s.ckpt.Write(ctx, tx, batch); err != nil {
			return sinks.Outcomes{}, sqliteTransient(fmt.Errorf("sqlite sink: checkpoint in %s: %w", s.ckpt.Name, s.ctxErr(ctx, err)))
		}
	}
	if err := tx.Commit(); err != nil {
		return fail("commit to", err)
	}
	return out, nil
}

// chunkRows is how many rows one multi-row INSERT takes: enough to spread
// a statement's cost, few enough to bind quickly.
const chunkRows = 64

// chunk returns chunkRows when rows starts with that many upserts of
// distinct keys, else 0.
func (s *Sink) chunk(rows []sqliteRow) int {
	if len(rows) < chunkRows {
		return 0
	}
	clear(s.chunkKeys)
	for i := range chunkRows {
		r := &rows[i]
		if r.op != opUpsert {
			return 0
		}
		if _, dup := s.chunkKeys[r.key]; dup {
			return 0
		}
		s.chunkKeys[r.key] = struct{}{}
	}
	return chunkRows
}

// insertChunk inserts rows (chunkRows of them, distinct keys) with one
// statement inside a savepoint. It reports false, having rolled the
// savepoint back, when a key already had a row or SQLite refused a row:
// the rows are then written one by one, which tells them apart.
func (s *Sink) insertChunk(ctx context.Context, st *statements, rows []sqliteRow) (bool, error) {
	if _, err := st.savepoint.ExecContext(ctx); err != nil {
		return false, err
	}
	args := rows[0].args[:len(rows)*len(s.cols)] // the rows' args are consecutive
	n, err := changes(st.insertMany.ExecContext(ctx, args...))
	if err == nil && n == int64(len(rows)) {
		_, err = st.release.ExecContext(ctx)
		return err == nil, err
	}
	if err != nil && !sqliteRejectsData(err) {
		return false, err
	}
	if _, err := st.rollbackTo.ExecContext(ctx); err != nil {
		return false, err
	}
	_, err = st.release.ExecContext(ctx)
	return false, err
}

// txStatements are the prepared statements in tx.
func (s *Sink) txStatements(ctx context.Context, tx *sql.Tx) statements {
	var st statements
	for _, p := range []struct{ from, to **sql.Stmt }{
		{&s.stmts.insert, &st.insert}, {&s.stmts.update, &st.update}, {&s.stmts.lookup, &st.lookup}, {&s.stmts.delete, &st.delete},
		{&s.stmts.insertMany, &st.insertMany}, {&s.stmts.savepoint, &st.savepoint}, {&s.stmts.release, &st.release}, {&s.stmts.rollbackTo, &st.rollbackTo},
	} {
		if *p.from != nil {
			*p.to = tx.StmtContext(ctx, *p.from)
		}
	}
	return st
}

// writeRow runs one record's statements and counts what they did.
func (s *Sink) writeRow(ctx context.Context, st *statements, row *sqliteRow, out *sinks.Outcomes) error {
	switch row.op {
	case opSkip:
		out.Ignored++
		return nil
	case opDelete:
		args := []any{row.key}
		if s.version >= 0 {
			args = append(args, row.args[s.version])
		}
		n, err := changes(st.delete.ExecContext(ctx, args...))
		switch {
		case err != nil:
			return err
		case n > 0:
			out.Deleted++
			return nil
		}
		if s.version >= 0 {
			if found, _, err := s.lookup(ctx, st, row, out); err != nil {
				return err
			} else if found {
				out.Stale++
				return nil
			}
		}
		out.Absent++
		return nil
	}
	n, err := changes(st.insert.ExecContext(ctx, row.args...))
	if err != nil {
		return err
	}
	if n > 0 {
		out.Inserted++
		return nil
	}
	// The key's row is there, or a trigger of the table skipped the row.
	cmp := 1
	if s.version >= 0 || s.prov[0] >= 0 && s.prov[1] >= 0 || s.triggers {
		var found bool
		if found, cmp, err = s.lookup(ctx, st, row, out); err != nil {
			return err
		}
		switch {
		case !found && s.triggers:
			out.Ignored++ // the INSERT changed nothing and no row has the key: a trigger skipped it
			return nil
		case !found:
			return fmt.Errorf("the row of key %q conflicted on insert but cannot be read", excerpt(row.key))
		}
	}
	switch {
	case s.ignore:
		out.Ignored++
		return nil
	case cmp == 0:
		out.Duplicate++
		return nil
	case cmp < 0:
		out.Stale++
		return nil
	case st.update == nil:
		out.Unchanged++
		return nil
	}
	if n, err = changes(st.update.ExecContext(ctx, row.args...)); err != nil {
		return err
	}
	if n > 0 {
		out.Updated++
	} else {
		out.Unchanged++
	}
	return nil
}

// lookup reads the key's row: whether there is one, and how the record's
// version compares with the row's (1 with no version). It counts a key
// collision in out when the row came from another topic or partition.
func (s *Sink) lookup(ctx context.Context, st *statements, row *sqliteRow, out *sinks.Outcomes) (found bool, cmp int, err error) {
	args := []any{row.key}
	if s.version >= 0 {
		args = append(args, row.args[s.version])
	}
	var topic sql.NullString
	var part, off sql.NullInt64
	err = st.lookup.QueryRowContext(ctx, args...).Scan(&topic, &part, &off, &cmp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	r := row.rec
	if topic.Valid && part.Valid && (topic.String != r.Topic || int32(part.Int64) != r.Partition) {
		out.Collisions++
		if out.FirstCollision == "" {
			out.FirstCollision = fmt.Sprintf("%s/%d/%s and %s/%d/%d: key %s", topic.String, part.Int64, nullInt(off), r.Topic, r.Partition, r.Offset, excerpt(row.key))
		}
	}
	return true, cmp, nil
}

func nullInt(n sql.NullInt64) string {
	if !n.Valid {
		return "?"
	}
	return strconv.FormatInt(n.Int64, 10)
}

// changes is the number of rows a statement changed (SQLite's changes()).
func changes(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqliteTransient marks err as a *TransientError when the database was
// locked by another connection for longer than the busy timeout.
func sqliteTransient(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &sinks.TransientError{Err: err}
		}
	}
	return err
}

// ctxErr returns the context's error when the context ended (the driver
// reports an interrupted statement in its own words), else err.
func (s *Sink) ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// sqliteRejectsData reports whether err is SQLite refusing the data of one
// row: a constraint other than the key (a NOT NULL or CHECK of a table made
// by hand), a value too big, or a datatype mismatch (a STRICT table).
func sqliteRejectsData(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
		return true
	}
	return false
}
