package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/replay-tool/replay/sinks"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// errTxLost is a chunk's statement failing in a way that ended the whole
// transaction, not only the statement.
var errTxLost = errors.New("the statement rolled the transaction back")

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
// row, which makes the row a bad record that follows on_error: a
// constraint (a unique index on another column, a NOT NULL, CHECK or
// foreign key of a table made by hand, a trigger's RAISE), a value too
// big, or a datatype mismatch (a STRICT table). A database locked by
// another connection (SQLITE_BUSY, SQLITE_LOCKED) passes by itself and is
// retried (sqliteTransient); any other error fails the batch as the sink's.
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
