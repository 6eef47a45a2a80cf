package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

// sqlState is the SQLSTATE of a PostgreSQL error in err's chain, "" for
// any other error.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// othersFailed carries the error of another shard of the Write into the
// first shard, whose transaction it rolls back.
type othersFailed struct{ err error }

func (e othersFailed) Error() string { return e.err.Error() }

// recordError is r's *record.Error for why, which follows on_error.
func (s *Sink) recordError(r *record.Record, why error) *record.Error {
	return record.NewError(r, fmt.Errorf("postgres sink: upsert into %s: %w", s.name, why))
}

// rejectsData reports whether err is the database refusing the data of a
// row, which makes the row a bad record that follows on_error: a data
// exception (class 22), an integrity constraint violation (23), a row too
// big for an index (54000), or an error a trigger or function raised (P0).
// Any other class is not the row's fault: a lost connection (08), a
// serialization failure or deadlock (40001, 40P01), a shutdown (57P01) or
// a lack of resources (53) are retried (sinks.Transient); the rest fail
// the batch as the sink's.
func rejectsData(err error) bool {
	code := sqlState(err)
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") || code == "54000" || strings.HasPrefix(code, "P0")
}

// rejectedRows turns a failed write of w into the error Write returns.
// When the database rejected the data of a row (rejectsData), or a shard
// gave up a lock wait (shardLockWait), it finds every row of w it rejects
// (isolate), remembers them (s.rejected) and returns the *record.Error of
// the first by offset. A rejection no row causes on its own (a row of
// another transaction, since rolled back; a lock held past lock_timeout)
// is transient. Any other error is returned as it is.
func (s *Sink) rejectedRows(ctx context.Context, conn *pgxpool.Conn, w *writePlan, err error) error {
	lockWait := shardLockWait(w, err)
	if !rejectsData(err) && !lockWait || ctx.Err() != nil {
		return err
	}
	bad, ierr := s.isolate(ctx, conn, w)
	switch {
	case ierr != nil && sinks.Transient(ierr):
		return fmt.Errorf("postgres sink: upsert into %s: find the rows it rejects: %w", s.name, s.scrub(ierr))
	case ierr != nil:
		return err
	case len(bad) == 0 && lockWait:
		return &sinks.TransientError{Err: fmt.Errorf("%w; no row is rejected on its own (a shard waited for a row of another transaction)", err)}
	case len(bad) == 0:
		return &sinks.TransientError{Err: fmt.Errorf("%w; no row is rejected on its own (it met a row of another transaction, since rolled back)", err)}
	}
	slices.SortFunc(bad, func(a, b rejectedRow) int { return cmp.Compare(a.rec.Offset, b.rec.Offset) })
	recs, errs := make([]*record.Record, len(bad)), make([]*record.Error, len(bad))
	for i, b := range bad {
		recs[i], errs[i] = b.rec, b.err
	}
	s.rejected.Remember(recs, errs)
	return errs[0]
}

// shardLockWait reports whether err ended a lock wait of a sharded
// Write (w has several shards): a lock_timeout (55P03) or a deadlock
// (40P01). A shard waiting for a row of another shard of the same Write
// would wait for good; written through one connection (isolate), such a
// row is a constraint violation, a bad record; a wait for another
// Write's rows is transient.
func shardLockWait(w *writePlan, err error) bool {
	code := sqlState(err)
	return len(w.shards) > 1 && (code == "55P03" || code == "40P01")
}

// rejectedRow is a row the database rejects, and why.
type rejectedRow struct {
	rec *record.Record
	err *record.Error
}

// isolate finds the rows of w that the database rejects, on conn, in a
// transaction that is rolled back. It writes w as Write does, each part
// inside a savepoint; a part the database rejects is rolled back and
// halved until the rejected row is alone (about 2·b·log2(n) statements
// for b rejected rows of n). Of two rows that conflict with each other,
// the later one is rejected. Deferred constraints are checked at each
// statement, as the commit would.
func (s *Sink) isolate(ctx context.Context, conn *pgxpool.Conn, w *writePlan) ([]rejectedRow, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // nothing of it is kept
	if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL IMMEDIATE"); err != nil {
		return nil, err
	}
	var bad []rejectedRow
	var part func(stmt string, rows *pgRows, args []any) error
	part = func(stmt string, rows *pgRows, args []any) error {
		b := &pgx.Batch{}
		b.Queue("SAVEPOINT replay_part")
		b.Queue(stmt, args...)
		b.Queue("RELEASE SAVEPOINT replay_part")
		err := tx.SendBatch(ctx, b).Close()
		if err == nil || !rejectsData(err) {
			return err
		}
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT replay_part"); rerr != nil {
			return rerr
		}
		if rows.len() == 1 {
			bad = append(bad, rejectedRow{rows.recs[0], s.recordError(rows.recs[0], s.scrub(err))})
			return nil
		}
		for _, half := range []*pgRows{rows.slice(0, rows.len()/2), rows.slice(rows.len()/2, rows.len())} {
			args := half.args()
			if stmt == s.st.remove {
				args = s.removeArgs(half)
			}
			if err := part(stmt, half, args); err != nil {
				return err
			}
		}
		return nil
	}
	for _, sh := range w.shards {
		if sh.del.len() > 0 {
			if err := part(s.st.remove, sh.del, s.removeArgs(sh.del)); err != nil {
				return nil, err
			}
		}
		for _, rows := range append([]*pgRows{sh.up}, sh.more...) {
			if rows.len() > 0 {
				if err := part(s.st.upsert, rows, rows.args()); err != nil {
					return nil, err
				}
			}
		}
	}
	return bad, nil
}
