package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
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
// (ErrNoVersion), and a row the database rejects (sqliteRejectsData): the
// first of the batch's, the others remembered for the Writes that follow
// without it (sqlcheckpoint.Rejected). Any other failure is a plain error,
// and nothing is written. The outcomes are counted once
// the transaction is committed and durable.
//
// Writes from several goroutines (the partitions of a run) that wait for
// one another share a transaction: the sink's writer takes the batches
// that wait while it commits, up to groupRows rows, and writes them in one
// transaction (group commit). A batch that fails on its own data returns
// its error, and the transaction is written again without it: the others
// commit, and each Write returns once the commit holding its batch is
// durable (the syncer has synced the WAL after it). After a failed sync
// every Write fails with that sync's error.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, err)
	}
	if err := s.rejected.First(batch); err != nil {
		return err
	}
	rows, err := s.rows(batch)
	if err != nil {
		return err
	}
	req := &writeReq{ctx: ctx, rows: rows, batch: batch, done: make(chan struct{})}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, ctx.Err())
	case <-s.quit:
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, errClosed)
	}
	// Taken: the writer ends it promptly once ctx ends, and answers.
	<-req.done
	if req.err != nil {
		return req.err
	}
	s.pos.Wrote(batch)
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows)).Msg("upserted")
	return nil
}

// errClosed is a Write after Close.
var errClosed = errors.New("the sink is closed")

// groupRows bounds the rows of one group commit (a transaction of a few
// MiB); a single larger batch is one group.
const groupRows = 8192

// writeReq is a Write handed to the sink's writer.
type writeReq struct {
	ctx   context.Context
	rows  []sqliteRow
	batch []record.Record
	// err is the Write's answer, set before done is closed.
	err  error
	done chan struct{}
	out  sinks.Outcomes
	// rowByRow: a chunk of it ended the transaction; it is written again
	// one row at a time (writeGroup).
	rowByRow bool
}

// writer runs the Writes handed to it until Close: one group commit at a
// time, of the request it waited for and those waiting behind it.
func (s *Sink) writer() {
	defer close(s.writerDone)
	defer close(s.toSync) // the syncer acknowledges what it holds, then stops
	for {
		var group []*writeReq
		select {
		case req := <-s.reqs:
			group = append(group, req)
		case <-s.quit:
			return
		}
		rows := len(group[0].rows)
	more:
		for rows < groupRows {
			select {
			case req := <-s.reqs:
				group = append(group, req)
				rows += len(req.rows)
			default:
				break more
			}
		}
		s.awaitCheckpoint()
		s.sem <- struct{}{}
		committed := s.writeGroup(group)
		<-s.sem
		if committed { // tell the checkpointer
			s.commits.Add(1)
			select {
			case s.walKick <- struct{}{}:
			default:
			}
		}
		if committed && s.wal != nil {
			s.toSync <- group // acknowledged once the WAL is synced
			continue
		}
		s.acknowledge(group, nil)
	}
}

// acknowledge answers group's Writes: those without an error of their own
// get syncErr, or (nil) have their outcomes counted.
func (s *Sink) acknowledge(group []*writeReq, syncErr error) {
	s.mu.Lock()
	for _, r := range group {
		if r.err == nil && syncErr != nil {
			r.err = syncErr
		}
		if r.err == nil {
			s.out.Add(r.out)
		}
	}
	s.mu.Unlock()
	for _, r := range group {
		close(r.done)
	}
}

// writeGroup writes group's batches in one transaction and sets each
// request's err (nil: committed) and outcomes; it reports whether it
// committed. A batch that fails on its own rolls the transaction back,
// and the group is written again without it (no savepoint spans a batch:
// its statement journal would spill to a temporary file).
func (s *Sink) writeGroup(group []*writeReq) (committed bool) {
	if err := s.syncErr.Load(); err != nil {
		failRest(group, err)
		return false
	}
	// The transaction ends early only when every request's context has.
	tctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var live atomic.Int32
	live.Store(int32(len(group)))
	for _, r := range group {
		stop := context.AfterFunc(r.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	// Each attempt but the last ends one request (with its error) or
	// makes it go row by row (to find its record), so this ends.
	for range 2*len(group) + 1 {
		committed, again := s.tryGroup(tctx, group)
		if !again {
			return committed
		}
	}
	failRest(group, fmt.Errorf("sqlite sink: upsert into %s: the batches of a transaction kept failing", s.name))
	return false
}

// failRest sets err as the answer of the requests of group without one.
func failRest(group []*writeReq, err error) {
	for _, r := range group {
		if r.err == nil {
			r.err = err
		}
	}
}

// tryGroup writes the requests of group that have no error yet in one
// transaction. again: one of them failed on its own (its err is set, or
// it is to go row by row), the transaction was rolled back, and the group
// is to be written again.
func (s *Sink) tryGroup(tctx context.Context, group []*writeReq) (committed, again bool) {
	tx, err := s.db.BeginTx(tctx, nil)
	if err != nil {
		failRest(group, sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(group[0].ctx, err))))
		return false, false
	}
	st := s.txStatements(tctx, tx)
	// Without cancellation (the driver would start a goroutine per
	// statement): writeBatch checks the context every few hundred rows.
	sctx := context.WithoutCancel(tctx)
	written := 0
	for _, r := range group {
		if r.err != nil {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, err)
			continue
		}
		out, err := s.writeBatch(r.ctx, sctx, tx, &st, r)
		switch {
		case err == nil:
			r.out = out
			written++
			continue
		case errors.Is(err, errTxLost) && !r.rowByRow:
			// A trigger's RAISE(ROLLBACK) in a chunk: row by row finds it.
			r.rowByRow = true
		case r.ctx.Err() != nil || errors.As(err, new(*record.Error)):
			r.err = err
		default:
			_ = tx.Rollback()
			failRest(group, err)
			return false, false
		}
		_ = tx.Rollback() // may be gone already (RAISE(ROLLBACK))
		return false, true
	}
	if written == 0 {
		_ = tx.Rollback()
		return false, false
	}
	if err := tx.Commit(); err != nil {
		failRest(group, sqliteTransient(fmt.Errorf("sqlite sink: commit to %s: %w", s.name, s.ctxErr(group[0].ctx, err))))
		return false, false
	}
	return true, false
}

func (s *Sink) rows(batch []record.Record) ([]sqliteRow, error) {
	rows := make([]sqliteRow, len(batch))
	args := make([]any, len(batch)*len(s.cols))
	var a arena
	for i := range batch {
		r := &batch[i]
		row := sqliteRow{rec: r, key: r.IdempotencyKey()}
		if r.Value == nil {
			switch s.tombstone {
			case dbsection.OnTombstoneSkip:
				row.op = opSkip
			case dbsection.OnTombstoneDelete:
				row.op = opDelete
			}
		}
		if row.op != opSkip {
			row.args = args[i*len(s.cols) : (i+1)*len(s.cols)] // capacity to the end: insertChunk takes consecutive rows
			for j := range s.cols {
				v, err := cell(&s.cols[j], r, row.key, &a)
				if err != nil {
					return nil, err
				}
				if t, ok := v.(string); s.utf16 && ok && !utf8.ValidString(t) {
					// SQLite would convert the text to UTF-16, each invalid byte
					// to U+FFFD: keys that differ would become one.
					return nil, record.NewError(r, fmt.Errorf("sqlite sink: column %s: the text is not UTF-8, and this database stores text as %s, which would change it: %w; use a UTF-8 database (PRAGMA encoding before the first table) or a BLOB column", s.cols[j].name, s.encoding, ErrChanged))
				}
				row.args[j] = v
			}
			if s.version >= 0 && row.op == opUpsert && row.args[s.version] == nil {
				return nil, record.NewError(r, fmt.Errorf("sqlite sink: version %s: the record has none (missing or null), so its update cannot be ordered: %w", s.cols[s.version].field.Arg, ErrNoVersion))
			}
		}
		rows[i] = row
	}
	return rows, nil
}

// writeBatch runs rows' statements (one batch's) in tx, then the batch's
// checkpoint, and returns what they did. ctx is the batch's Write's;
// sctx, which is never cancelled, runs the statements.
func (s *Sink) writeBatch(ctx, sctx context.Context, tx *sql.Tx, st *statements, r *writeReq) (out sinks.Outcomes, err error) {
	rows, batch := r.rows, r.batch
	fail := func(err error) (sinks.Outcomes, error) {
		return sinks.Outcomes{}, sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	fast := st.insertMany != nil && !r.rowByRow
	var bad []*record.Record // the rows SQLite rejects, and why
	var errs []*record.Error
	for i := 0; i < len(rows); i++ {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
		}
		if fast {
			if n := s.chunk(rows[i:]); n > 0 {
				ok, err := s.insertChunk(sctx, st, rows[i:i+n])
				if err != nil {
					return fail(err)
				}
				if ok {
					out.Inserted += int64(n)
					i += n - 1
					continue
				}
				// A key of the chunk has a row: the rest goes row by row.
				fast = false
			}
		}
		row := &rows[i]
		if err := s.writeRow(sctx, st, row, &out); err != nil {
			err = fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err))
			if !sqliteRejectsData(err) {
				return sinks.Outcomes{}, sqliteTransient(err)
			}
			// The rest of the batch only finds the other rejected rows
			// (the transaction is rolled back). After a RAISE(ROLLBACK) the
			// savepoint begins another, so that no row runs in autocommit.
			if _, err := st.savepoint.ExecContext(sctx); err != nil {
				return fail(err)
			}
			bad, errs = append(bad, row.rec), append(errs, record.NewError(row.rec, err))
		}
	}
	if len(bad) > 0 {
		s.rejected.Remember(bad, errs)
		return sinks.Outcomes{}, errs[0]
	}
	if s.ckpt != nil {
		if err := s.ckpt.Write(sctx, tx, batch); err != nil {
			return sinks.Outcomes{}, sqliteTransient(fmt.Errorf("sqlite sink: checkpoint in %s: %w", s.ckpt.Name, s.ctxErr(ctx, err)))
		}
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
	stmt, args := st.insertMany, rows[0].args[:len(rows)*len(s.cols)] // the rows' args are consecutive
	if st.insertShared != nil {
		var ok bool
		if s.sharedArgs, ok = s.shared.args(s.sharedArgs[:0], rows); ok {
			stmt, args = st.insertShared, s.sharedArgs
		}
	}
	n, err := changes(stmt.ExecContext(ctx, args...))
	clear(s.sharedArgs)
	if err == nil && n == int64(len(rows)) {
		_, err = st.release.ExecContext(ctx)
		return err == nil, err
	}
	if err != nil && !sqliteRejectsData(err) {
		return false, err
	}
	if _, rerr := st.rollbackTo.ExecContext(ctx); rerr != nil {
		if err != nil {
			return false, fmt.Errorf("%w: %v", errTxLost, err)
		}
		return false, rerr
	}
	_, err = st.release.ExecContext(ctx)
	return false, err
}

// txStatements are the prepared statements in tx.
func (s *Sink) txStatements(ctx context.Context, tx *sql.Tx) statements {
	var st statements
	to := st.each()
	for i, from := range s.stmts.each() {
		if *from != nil {
			*to[i] = tx.StmtContext(ctx, *from)
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
		n, err := changes(st.delete.ExecContext(ctx, s.keyArgs(row)...))
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
	case cmp == 0:
		out.Duplicate++
	case cmp < 0:
		out.Stale++
	case st.update == nil:
		out.Unchanged++
	default:
		if n, err = changes(st.update.ExecContext(ctx, row.args...)); err != nil {
			return err
		}
		if n > 0 {
			out.Updated++
		} else {
			out.Unchanged++
		}
	}
	return nil
}

// lookup reads the key's row: whether there is one, and how the record's
// version compares with the row's (1 with no version). It counts a key
// collision in out when the row came from another topic or partition.
func (s *Sink) lookup(ctx context.Context, st *statements, row *sqliteRow, out *sinks.Outcomes) (found bool, cmp int, err error) {
	var topic sql.NullString
	var part, off sql.NullInt64
	err = st.lookup.QueryRowContext(ctx, s.keyArgs(row)...).Scan(&topic, &part, &off, &cmp)
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

// keyArgs are the arguments of delete and lookup: the key, and the
// record's version with a version column.
func (s *Sink) keyArgs(row *sqliteRow) []any {
	if s.version >= 0 {
		return []any{row.key, row.args[s.version]}
	}
	return []any{row.key}
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
