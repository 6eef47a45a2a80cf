package sqlite

import (
	"context"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// sqliteRow is one row of the upsert.
type sqliteRow struct {
	rec  *record.Record
	args []any
}

// Write upserts batch in one transaction. A key template failing on a
// record returns its *record.Error and writes nothing; so does a row the
// database rejects (a constraint of a table made by hand, a value too big).
// Any other failure is a plain error, and nothing is written.
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
	if err := s.upsertRows(ctx, rows, batch); err != nil {
		return err
	}
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows)).Msg("upserted")
	return nil
}

func (s *Sink) rows(batch []record.Record) ([]sqliteRow, error) {
	rows := make([]sqliteRow, len(batch))
	for i := range batch {
		r := &batch[i]
		key, err := s.keyer.Key(r)
		if err != nil {
			return nil, err
		}
		rows[i] = sqliteRow{rec: r, args: s.values(r, key)}
	}
	return rows, nil
}

// values are r's column values: integers for partition and offset, text
// for the others (timestamps as RFC 3339 in UTC with milliseconds, which
// sorts as time does), nil for NULL.
func (s *Sink) values(r *record.Record, key string) []any {
	cs := encode.Cells{Record: r, Key: key}
	out := make([]any, len(s.cols))
	for i, c := range s.cols {
		switch c.Field.Kind {
		case plan.FieldPartition:
			out[i] = int64(r.Partition)
		case plan.FieldOffset:
			out[i] = r.Offset
		default:
			if v, ok := cs.Text(c); ok {
				out[i] = v
			}
		}
	}
	return out
}

func (s *Sink) upsertRows(ctx context.Context, rows []sqliteRow, batch []record.Record) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, s.upsert)
	if err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	defer stmt.Close()
	for i := range rows {
		if _, err := stmt.ExecContext(ctx, rows[i].args...); err != nil {
			err = fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err))
			if sqliteRejectsData(err) {
				return record.NewError(rows[i].rec, err)
			}
			return sqliteTransient(err)
		}
	}
	if s.ckpt != nil {
		if err := s.ckpt.Write(ctx, tx, batch); err != nil {
			return sqliteTransient(fmt.Errorf("sqlite sink: checkpoint in %s: %w", s.ckpt.Name, s.ctxErr(ctx, err)))
		}
	}
	if err := tx.Commit(); err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: commit to %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	return nil
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
