package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
)

// Write writes batch and returns once it is committed. Records of one
// key are applied in offset order as separate batches would be, but as one
// net change per key: with on_conflict: update the key's last record wins
// (a tombstone under on_tombstone: delete removes the row), except with a
// version, where each of a key's records is upserted in turn (planRounds)
// and the greatest version wins; with ignore the first upsert after the
// key's last tombstone (or the first record when there is none) is
// inserted when the key has no row. With connections: N > 1 the keys are
// sharded over N connections (writeShards); the checkpoint (if any) is
// written in the transaction of the first shard, which commits only after
// every other shard committed, so a checkpoint never covers rows that are
// not durable.
//
// A key template failing on a record, or a value the table cannot hold
// exactly, returns the record's *record.Error and writes nothing; so does
// a row the database rejects (rejectsData): the first of the batch's, the
// others remembered for the Writes that follow without it (rejectedRows).
// Any other failure is a plain error.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres sink: upsert into %s: %w", s.name, err)
	}
	if err := s.rejected.First(batch); err != nil {
		return err
	}
	w, err := s.plan(batch)
	if err != nil {
		return err
	}
	if len(w.shards) > 1 {
		s.acquire.Lock() // all of a Write's connections at once: Writes cannot hold part each and wait for the rest
	}
	conns := make([]*pgxpool.Conn, 0, len(w.shards))
	for range w.shards {
		var c *pgxpool.Conn
		if c, err = s.pool.Acquire(ctx); err != nil {
			break
		}
		conns = append(conns, c)
	}
	if len(w.shards) > 1 {
		s.acquire.Unlock()
	}
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	if err != nil {
		return fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if len(w.shards) == 1 {
		err = s.writeShard(ctx, conns[0], w.shards[0], batch, nil)
	} else {
		err = s.writeShards(ctx, conns, w, batch)
	}
	if err != nil {
		return s.rejectedRows(ctx, conns[0], w, err)
	}
	s.count(w.superseded)
	s.pos.Wrote(batch)
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("records", len(batch)).Int("shards", len(w.shards)).Msg("upserted")
	return nil
}

// shard is the part of a batch that one connection writes: deletes, then
// upserts. more holds, with a version column, the later upserts of keys
// that have several in the batch, in rounds of one row per key, upserted
// after up in order: the database compares each one's version with what
// the one before it left, as separate batches would.
type shard struct {
	up, del *pgRows
	more    []*pgRows
}

// writePlan is a batch resolved into shards of net changes per key.
type writePlan struct {
	shards []shard
	// superseded counts the records another record of the same key
	// replaced within the batch.
	superseded sinks.Outcomes
}

// dropEmpty leaves out the shards without rows, but the first stays when
// it carries the checkpoint (ckpt), and one stays in any case.
func (w *writePlan) dropEmpty(ckpt bool) {
	out := w.shards[:0]
	for i, sh := range w.shards {
		if sh.up.len()+sh.del.len() > 0 || i == 0 && ckpt {
			out = append(out, sh)
		}
	}
	if len(out) == 0 {
		out = append(out, shard{})
	}
	w.shards = out
}

// keyOf is r's idempotency key; a key a text column cannot hold is r's
// *record.Error.
func (s *Sink) keyOf(r *record.Record) (string, error) {
	key := r.IdempotencyKey()
	if why := badString(key); why != "" {
		return "", s.recordError(r, fmt.Errorf("the idempotency key %q %s: a text column cannot hold it; change the key template (a binary Kafka key: printf \"%%x\" .Key)", excerpt(key), why))
	}
	return key, nil
}

// keyOps is one key's net change in a batch: the index of the record it
// deletes with (del) and of the one it upserts (up), -1 for none.
type keyOps struct {
	key     string
	del, up int
}

// plan computes the keys of batch and each key's net change.
func (s *Sink) plan(batch []record.Record) (*writePlan, error) {
	if s.ver >= 0 && !s.ignore && s.onTombstone != dbsection.OnTombstoneDelete {
		return s.planRounds(batch)
	}
	w := &writePlan{shards: make([]shard, s.connections)}
	ops, err := s.groupByKey(batch, w)
	if err != nil {
		return nil, err
	}
	rowsOf := func(rs **pgRows, n int) *pgRows {
		if *rs == nil {
			*rs = newRows(s.cols, n)
		}
		return *rs
	}
	vjs := make([]valueJSON, len(batch))
	for _, o := range ops {
		sh := w.shardOf(o.key)
		if o.del >= 0 {
			if err := rowsOf(&sh.del, 0).add(&batch[o.del], o.key, s.ver, false, &vjs[o.del]); err != nil {
				return nil, s.recordError(&batch[o.del], err)
			}
		}
		if up := o.up; up >= 0 {
			if err := rowsOf(&sh.up, len(ops)/s.connections+1).add(&batch[up], o.key, s.ver, batch[up].Value != nil, &vjs[up]); err != nil {
				return nil, s.recordError(&batch[up], err)
			}
		}
	}
	w.dropEmpty(s.ckpt != nil)
	return w, nil
}

// groupByKey computes each key's net change (ops, in the order of the
// key's first record): the last record (on_conflict: update), or the
// last tombstone and the first upsert after it, else the first upsert
// (on_conflict: ignore). It counts in w the records the net change
// replaced within the batch, and the tombstones skipped by the plan.
func (s *Sink) groupByKey(batch []record.Record, w *writePlan) ([]keyOps, error) {
	index := make(map[string]int, len(batch)) // key → its keyOps in ops
	ops := make([]keyOps, 0, len(batch))
	for i := range batch {
		r := &batch[i]
		tomb := r.Value == nil
		if tomb && s.onTombstone == dbsection.OnTombstoneSkip {
			w.superseded.Ignored++
			continue
		}
		key, err := s.keyOf(r)
		if err != nil {
			return nil, err
		}
		at, seen := index[key]
		if !seen {
			at = len(ops)
			index[key] = at
			ops = append(ops, keyOps{key: key, del: -1, up: -1})
		}
		o := &ops[at]
		del := tomb && s.onTombstone == dbsection.OnTombstoneDelete
		switch {
		case s.ignore && !del && o.up >= 0:
			w.superseded.Ignored++
		case s.ignore && !del:
			o.up = i
		default: // r replaces the key's net change so far
			if o.del >= 0 {
				w.superseded.Deleted++
			}
			if o.up >= 0 && s.ignore {
				w.superseded.Ignored++
			} else if o.up >= 0 {
				w.superseded.Updated++
			}
			o.del, o.up = -1, i
			if del {
				o.del, o.up = i, -1
			}
		}
	}
	return ops, nil
}

// planRounds is plan for a sink with a version column (on_conflict:
// update, tombstones not deleted): a key's last record need not have the
// greatest version, so its records are upserted in offset order, the
// first in the shard's up, the second in more[0], and so on.
func (s *Sink) planRounds(batch []record.Record) (*writePlan, error) {
	w := &writePlan{shards: make([]shard, s.connections)}
	seen := make(map[string]int, len(batch)) // key → its records so far
	for i := range batch {
		r := &batch[i]
		if r.Value == nil && s.onTombstone == dbsection.OnTombstoneSkip {
			w.superseded.Ignored++
			continue
		}
		var vj valueJSON
		key, err := s.keyOf(r)
		if err != nil {
			return nil, err
		}
		sh := w.shardOf(key)
		round := seen[key]
		seen[key] = round + 1
		if round == 0 && sh.up == nil {
			sh.up = newRows(s.cols, len(batch)/s.connections+1)
		} else if len(sh.more) < round {
			sh.more = append(sh.more, newRows(s.cols, 0))
		}
		rows := sh.up
		if round > 0 {
			rows = sh.more[round-1]
		}
		if err := rows.add(r, key, s.ver, r.Value != nil, &vj); err != nil {
			return nil, s.recordError(r, err)
		}
	}
	w.dropEmpty(s.ckpt != nil)
	return w, nil
}

// writeShard writes one shard in one transaction with, when batch is set,
// the batch's checkpoint; wait, when set, is called before the commit and
// its error rolls the transaction back. The shard's outcomes are counted
// once it is committed. While the table holds none of the keys the sink
// writes (fresh), the shard is written without ON CONFLICT (freshShard).
// Else a batch of at most copy_threshold rows and no wait is one round
// trip (an implicit transaction); a larger one is streamed into the COPY
// table first (copyReader).
func (s *Sink) writeShard(ctx context.Context, conn *pgxpool.Conn, sh shard, batch []record.Record, wait func() error) error {
	if wait != nil {
		wait = sync.OnceValue(wait) // a COPY that fell back may have waited already
	}
	if s.plain && sh.del.len() == 0 && len(sh.more) == 0 && sh.up.len() > 0 && s.fresh.Load() {
		if done, err := s.freshShard(ctx, conn, sh, batch, wait); done {
			return err
		}
	}
	useCopy := sh.up.len() > s.copyAbove
	var out sinks.Outcomes
	b := &pgx.Batch{}
	if sh.del.len() > 0 {
		s.queueDelete(b, &out, sh.del)
	}
	if sh.up.len() > 0 {
		s.queueUpserts(b, &out, sh, useCopy)
	}
	if batch != nil && s.ckpt != nil {
		s.ckpt.Queue(b, batch)
	}
	var err error
	if !useCopy && wait == nil {
		err = conn.SendBatch(ctx, b).Close()
	} else {
		err = s.inTx(ctx, conn, b, wait, func(tx pgx.Tx) error {
			if useCopy {
				_, err := tx.Conn().PgConn().CopyFrom(ctx, &copyReader{rows: sh.up}, s.st.copyTemp)
				return err
			}
			return nil
		})
	}
	var other othersFailed
	if errors.As(err, &other) {
		return other.err // another shard's error, already explained
	}
	if err != nil {
		return fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(err))
	}
	s.count(out)
	return nil
}

// queueDelete queues the statement that deletes the keys of rows, which
// counts its outcomes into out.
func (s *Sink) queueDelete(b *pgx.Batch, out *sinks.Outcomes, rows *pgRows) {
	n := int64(rows.len())
	b.Queue(s.st.remove, s.removeArgs(rows)...).QueryRow(func(row pgx.Row) error {
		var deleted, stale, dup int64
		if err := row.Scan(&deleted, &stale, &dup); err != nil {
			return err
		}
		out.Deleted += deleted
		out.Stale += stale
		out.Duplicate += dup
		out.Absent += n - deleted - stale - dup
		return nil
	})
}

// queueUpserts queues the upserts of sh's rows: its up rows from the COPY
// table (useCopy) or as arrays, then each of its more rounds.
func (s *Sink) queueUpserts(b *pgx.Batch, out *sinks.Outcomes, sh shard, useCopy bool) {
	// After a batch that found most of its rows unchanged (a re-run), the
	// identical rows are left out before the upsert.
	stmt, copyStmt := s.st.upsert, s.st.copyUpsert
	if s.st.upsertSame != "" && s.mostlySame.Load() {
		stmt, copyStmt = s.st.upsertSame, s.st.copyUpsertSame
	}
	if useCopy { // the rows are in the COPY table: no arrays
		s.queueUpsert(b, out, copyStmt, nil, sh.up.len())
	} else {
		s.queueUpsert(b, out, stmt, sh.up.args(), sh.up.len())
	}
	for _, rows := range sh.more {
		s.queueUpsert(b, out, stmt, rows.args(), rows.len())
	}
}

// removeArgs are the arguments of the statement that deletes rows' keys.
func (s *Sink) removeArgs(rows *pgRows) []any {
	args := []any{colArray{vals: &rows.vals[s.key]}}
	if s.ver >= 0 {
		args = append(args, colArray{vals: &rows.vals[s.ver]})
	}
	return args
}

// queueUpsert queues the upsert stmt of n rows (args: their arrays, or
// none from the COPY table) in b; its counts are added to out.
func (s *Sink) queueUpsert(b *pgx.Batch, out *sinks.Outcomes, stmt string, args []any, rows int) {
	n := int64(rows)
	b.Queue(stmt, args...).QueryRow(func(row pgx.Row) error {
		var ins, upd, stale, dup, coll, skipped int64
		var first *string
		if err := row.Scan(&ins, &upd, &stale, &dup, &coll, &first, &skipped); err != nil {
			return err
		}
		out.Inserted += ins
		out.Updated += upd
		out.Stale += stale
		out.Duplicate += dup
		out.Ignored += skipped // a trigger skipped them
		if s.ignore {
			out.Ignored += n - ins - upd - stale - dup - skipped
		} else {
			out.Unchanged += n - ins - upd - stale - dup - skipped
		}
		s.mostlySame.Store(2*(n-ins-upd) > n)
		s.fresh.Store(ins == n)
		if first != nil && out.FirstCollision == "" {
			out.FirstCollision = *first
		}
		out.Collisions += coll
		return nil
	})
}

// freshShard writes a shard of rows whose keys the table does not hold (a
// fresh load, as the last upsert found) without ON CONFLICT, which costs
// the server about half of the upsert, with the checkpoint and wait as
// writeShard: one COPY into the table itself when direct, else an INSERT
// from the arrays or (above copy_threshold rows) the COPY table. done is
// false, with nothing written, when the table refused a row (a key is
// stored after all, or bad data): the caller then upserts the shard,
// which counts the stored keys as the upsert does and names a bad row.
func (s *Sink) freshShard(ctx context.Context, conn *pgxpool.Conn, sh shard, batch []record.Record, wait func() error) (done bool, err error) {
	var b *pgx.Batch
	if batch != nil && s.ckpt != nil {
		b = &pgx.Batch{}
		s.ckpt.Queue(b, batch)
	}
	useCopy := sh.up.len() > s.copyAbove
	var tag pgconn.CommandTag
	write := func(c *pgx.Conn) (pgconn.CommandTag, error) {
		switch {
		case s.direct:
			return c.PgConn().CopyFrom(ctx, &copyReader{rows: sh.up, intoTable: true}, s.st.copyInto)
		case useCopy:
			if _, err := c.PgConn().CopyFrom(ctx, &copyReader{rows: sh.up}, s.st.copyTemp); err != nil {
				return pgconn.CommandTag{}, err
			}
			return c.Exec(ctx, s.st.copyInsert)
		}
		return c.Exec(ctx, s.st.insert, sh.up.args()...)
	}
	if b == nil && wait == nil && !(useCopy && !s.direct) {
		tag, err = write(conn.Conn()) // its own implicit transaction
	} else {
		err = s.inTx(ctx, conn, b, wait, func(tx pgx.Tx) (err error) {
			tag, err = write(tx.Conn())
			return err
		})
	}
	how, msg := "insert into", "inserted into the table without ON CONFLICT"
	if s.direct {
		how, msg = "copy into", "copied into the table"
	}
	var other othersFailed
	switch {
	case errors.As(err, &other):
		return true, other.err
	// 0A: a feature not supported on the table (COPY with row-level security).
	case err != nil && (rejectsData(err) || strings.HasPrefix(sqlState(err), "0A")) && ctx.Err() == nil:
		s.fresh.Store(false)
		s.log.Debug().Str("table", s.name).Err(s.scrub(err)).Msg(how + " the table refused a row; upserting the batch")
		return false, nil
	case err != nil:
		return true, fmt.Errorf("postgres sink: %s %s: %w", how, s.name, s.scrub(err))
	}
	// A trigger may have skipped rows: the count is PostgreSQL's.
	n := min(tag.RowsAffected(), int64(sh.up.len()))
	s.count(sinks.Outcomes{Inserted: n, Ignored: int64(sh.up.len()) - n})
	s.log.Debug().Str("table", s.name).Int("rows", sh.up.len()).Int64("inserted", n).Msg(msg)
	return true, nil
}

// inTx runs f, then b and wait (each when set), in a transaction on
// conn, committed when they all succeed.
func (s *Sink) inTx(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, wait func() error, f func(pgx.Tx) error) (err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := f(tx); err != nil {
		return err
	}
	if b != nil {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	if wait != nil {
		if err := wait(); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// count adds o to the sink's outcomes.
func (s *Sink) count(o sinks.Outcomes) {
	s.outMu.Lock()
	s.out.Add(o)
	s.outMu.Unlock()
}
