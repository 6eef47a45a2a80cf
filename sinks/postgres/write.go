package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

// Write writes batch and returns once it is committed. Records of one
// key are applied in offset order as separate batches would be, but as one
// net change per key: with on_conflict: update the key's last record wins
// (a tombstone under on_tombstone: delete removes the row), except with a
// version, where each of a key's records is upserted in turn (planRounds)
// and the greatest version wins; with ignore
// the first upsert after the key's last tombstone (or the first record
// when there is none) is inserted when the key has no row. With
// connections: N > 1 the keys are sharded over N connections, one
// transaction each, run at once and held before their commits until all
// ran (writeShards); the checkpoint (if any) is written in the
// transaction of the first shard, which commits only after every other
// shard committed, so a checkpoint never covers rows that are not durable.
//
// A key template failing on a record, or a value the table cannot hold
// exactly, returns the record's *record.Error and writes nothing; so does
// a row the database rejects (rejectsData): the first of the batch's, the
// others remembered for the Writes that follow without it
// (rejectedRows). Any other failure is a plain error.
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
	var conns []*pgxpool.Conn
	if len(w.shards) > 1 {
		s.acquire.Lock() // all of a Write's connections at once: Writes cannot hold part each and wait for the rest
	}
	for range w.shards {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			for _, c := range conns {
				c.Release()
			}
			if len(w.shards) > 1 {
				s.acquire.Unlock()
			}
			return fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
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

// writeShards runs the shards at once, each in a transaction of its own,
// and commits none of them before every shard's statements ran: a row
// the database refuses (or any other failure) in one shard rolls them all
// back, so a failed batch leaves nothing in the table. Then the others
// commit, and the first, which carries the checkpoint, commits only after
// they did. A commit itself failing (a connection lost at that moment)
// can still leave the shards that committed; the checkpoint then does not
// cover them, and a re-run finds their rows unchanged.
func (s *Sink) writeShards(ctx context.Context, conns []*pgxpool.Conn, w *writePlan, batch []record.Record) error {
	bar := &commitBarrier{left: len(w.shards), all: make(chan struct{})}
	// The shards run under the Write's context: a failure of one must not
	// cancel another whose commit the server may already have made.
	var rest errgroup.Group
	for i := 1; i < len(w.shards); i++ {
		rest.Go(func() error { return s.shardUnder(ctx, conns[i], w.shards[i], nil, bar, nil) })
	}
	err := s.shardUnder(ctx, conns[0], w.shards[0], batch, bar, func() error {
		if err := rest.Wait(); err != nil {
			return othersFailed{err}
		}
		return nil
	})
	if rerr := rest.Wait(); err == nil {
		err = rerr
	}
	return err
}

// shardUnder writes a shard of a sharded Write: before its commit it
// arrives at bar and waits for every shard, then runs then (the first
// shard waits there for the others' commits); a shard that fails before
// arrives with its error, which rolls every shard back.
func (s *Sink) shardUnder(ctx context.Context, conn *pgxpool.Conn, sh shard, batch []record.Record, bar *commitBarrier, then func() error) error {
	arrived := false
	err := s.writeShard(ctx, conn, sh, batch, func() error {
		arrived = true
		if err := bar.arrive(nil); err != nil {
			return err
		}
		if then != nil {
			return then()
		}
		return nil
	})
	if !arrived {
		_ = bar.arrive(err)
	}
	return err
}

// commitBarrier holds the shards of a Write before their commits until
// each shard has run its statements or failed.
type commitBarrier struct {
	mu   sync.Mutex
	left int           // shards that have not arrived
	err  error         // the first shard's failure
	all  chan struct{} // closed when every shard arrived
}

// arrive records one shard, once: err nil when its statements ran (it
// then waits for every shard, and returns the first failure of another
// as othersFailed, or nil), its error when it failed (it returns at once).
func (b *commitBarrier) arrive(err error) error {
	b.mu.Lock()
	if err != nil && b.err == nil {
		b.err = err
	}
	b.left--
	if b.left == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	<-b.all
	if b.err != nil { // written before all was closed
		return othersFailed{b.err}
	}
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

var shardSeed = maphash.MakeSeed()

// shardOf is the shard that writes key: always the same one for a key,
// so its records keep their order.
func (w *writePlan) shardOf(key string) *shard {
	if len(w.shards) == 1 {
		return &w.shards[0]
	}
	return &w.shards[maphash.String(shardSeed, key)%uint64(len(w.shards))]
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
	if why := badText([]byte(key)); why != "" {
		return "", s.recordError(r, fmt.Errorf("the idempotency key %q %s: a text column cannot hold it; change the key template (a binary Kafka key: printf \"%%x\" .Key)", excerpt(key), why))
	}
	return key, nil
}

// plan computes the keys of batch and each key's net change.
func (s *Sink) plan(batch []record.Record) (*writePlan, error) {
	if s.ver >= 0 && !s.ignore && s.onTombstone != plan.OnTombstoneDelete {
		return s.planRounds(batch)
	}
	type keyOps struct {
		first         int // index of the key's first record
		last          int // its last record
		lastTomb      int // its last tombstone (delete mode), -1 if none
		firstUp       int // its first upsert, -1 if none
		firstUpAfterT int // its first upsert after lastTomb, -1 if none
	}
	w := &writePlan{shards: make([]shard, s.connections)}
	index := make(map[string]int, len(batch)) // key → its keyOps in ops
	ops := make([]keyOps, 0, len(batch))
	keys := make([]string, len(batch))
	vjs := make([]valueJSON, len(batch))
	for i := range batch {
		r := &batch[i]
		tomb := r.Value == nil
		if tomb && s.onTombstone == plan.OnTombstoneSkip {
			w.superseded.Ignored++
			keys[i] = "\x00skip"
			continue
		}
		key, err := s.keyOf(r)
		if err != nil {
			return nil, err
		}
		keys[i] = key
		at, seen := index[key]
		if !seen {
			at = len(ops)
			index[key] = at
			ops = append(ops, keyOps{first: i, lastTomb: -1, firstUp: -1, firstUpAfterT: -1})
		}
		o := &ops[at]
		o.last = i
		if tomb && s.onTombstone == plan.OnTombstoneDelete {
			o.lastTomb, o.firstUpAfterT = i, -1
		} else {
			if o.firstUp < 0 {
				o.firstUp = i
			}
			if o.lastTomb >= 0 && o.firstUpAfterT < 0 {
				o.firstUpAfterT = i
			}
		}
	}
	rowsOf := func(rs **pgRows, n int) *pgRows {
		if *rs == nil {
			*rs = newRows(s.cols, n)
		}
		return *rs
	}
	var up, del int
	for at := range ops {
		o := &ops[at]
		key := keys[o.first]
		sh := w.shardOf(key)
		del, up = -1, -1
		switch {
		case !s.ignore && o.last == o.lastTomb:
			del = o.last
		case !s.ignore:
			up = o.last
		case o.lastTomb >= 0:
			del, up = o.lastTomb, o.firstUpAfterT
		default:
			up = o.firstUp
		}
		if del >= 0 {
			if err := rowsOf(&sh.del, 0).add(&batch[del], key, s.ver, false, &vjs[del]); err != nil {
				return nil, s.recordError(&batch[del], err)
			}
		}
		if up >= 0 {
			if err := rowsOf(&sh.up, len(ops)/s.connections+1).add(&batch[up], key, s.ver, batch[up].Value != nil, &vjs[up]); err != nil {
				return nil, s.recordError(&batch[up], err)
			}
		}
		// The key's other records were replaced within the batch.
		for i := o.first; i <= o.last; i++ {
			if i == del || i == up || keys[i] != key {
				continue
			}
			switch {
			case batch[i].Value == nil && s.onTombstone == plan.OnTombstoneDelete:
				w.superseded.Deleted++
			case s.ignore:
				w.superseded.Ignored++
			default:
				w.superseded.Updated++
			}
		}
	}
	w.dropEmpty(s.ckpt != nil)
	return w, nil
}

// planRounds is plan for a sink with a version column (on_conflict:
// update, tombstones written or skipped): a key's records are not
// collapsed into its last one, whose version need not be the greatest
// (a replay of an out-of-order topic), but upserted in offset order, the
// key's first record in the shard's up, its second in more[0], and so on.
func (s *Sink) planRounds(batch []record.Record) (*writePlan, error) {
	w := &writePlan{shards: make([]shard, s.connections)}
	seen := make(map[string]int, len(batch)) // key → its records so far
	for i := range batch {
		r := &batch[i]
		if r.Value == nil && s.onTombstone == plan.OnTombstoneSkip {
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
		var rows *pgRows
		switch {
		case round == 0:
			if sh.up == nil {
				sh.up = newRows(s.cols, len(batch)/s.connections+1)
			}
			rows = sh.up
		default:
			if len(sh.more) < round {
				sh.more = append(sh.more, newRows(s.cols, 0))
			}
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
		n := int64(sh.del.len())
		b.Queue(s.st.remove, s.removeArgs(sh.del)...).QueryRow(func(row pgx.Row) error {
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
	if sh.up.len() > 0 {
		// A batch after one that found most of its rows unchanged (a
		// re-run, a replay over a table that holds the window) leaves the
		// identical rows out before it upserts.
		same := s.st.upsertSame != "" && s.mostlySame.Load()
		var stmt string
		var args []any // the arrays, not built for rows that go through COPY
		switch {
		case useCopy && same:
			stmt = s.st.copyUpsertSame
		case useCopy:
			stmt = s.st.copyUpsert
		case same:
			stmt, args = s.st.upsertSame, sh.up.args()
		default:
			stmt, args = s.st.upsert, sh.up.args()
		}
		s.queueUpsert(b, &out, stmt, args, sh.up.len())
		for _, rows := range sh.more {
			stmt := s.st.upsert
			if same {
				stmt = s.st.upsertSame
			}
			s.queueUpsert(b, &out, stmt, rows.args(), rows.len())
		}
	}
	if batch != nil && s.ckpt != nil {
		s.ckpt.Queue(b, batch)
	}
	var err error
	if !useCopy && wait == nil {
		err = conn.SendBatch(ctx, b).Close()
	} else {
		err = s.inTx(ctx, conn, func(tx pgx.Tx) error {
			if useCopy {
				if _, err := tx.Conn().PgConn().CopyFrom(ctx, &copyReader{rows: sh.up}, s.st.copyTemp); err != nil {
					return err
				}
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if wait != nil {
				return wait()
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
// fresh load, as the last upsert found) without ON CONFLICT, the
// checkpoint (when batch is set) and wait in the same transaction, as
// writeShard does: with one COPY into the table itself when every column
// takes its values as sent (direct), else with an INSERT from the arrays
// or, above copy_threshold rows, from the COPY table, converted as the
// upsert converts them. An INSERT without ON CONFLICT costs the server
// about half of what the upsert costs, and the counts need no statement:
// every row is inserted. done is false, with nothing written, when the
// table refused a row (one of the keys is stored after all, bad data:
// rejectsData): the caller then upserts the shard, which counts the stored
// keys as the upsert does and names a bad row.
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
		err = s.inTx(ctx, conn, func(tx pgx.Tx) error {
			var err error
			if tag, err = write(tx.Conn()); err != nil {
				return err
			}
			if b != nil {
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return err
				}
			}
			if wait != nil {
				return wait()
			}
			return nil
		})
	}
	how := "insert into"
	if s.direct {
		how = "copy into"
	}
	var other othersFailed
	switch {
	case errors.As(err, &other):
		return true, other.err
	case err != nil && (rejectsData(err) || unsupported(err)) && ctx.Err() == nil:
		s.fresh.Store(false)
		s.log.Debug().Str("table", s.name).Err(s.scrub(err)).Msg(how + " the table refused a row; upserting the batch")
		return false, nil
	case err != nil:
		return true, fmt.Errorf("postgres sink: %s %s: %w", how, s.name, s.scrub(err))
	}
	// The command counts the rows it inserted; with no trigger on the
	// table that is every row, but the count is PostgreSQL's.
	n := min(tag.RowsAffected(), int64(sh.up.len()))
	s.count(sinks.Outcomes{Inserted: n, Ignored: int64(sh.up.len()) - n})
	msg := "inserted into the table without ON CONFLICT"
	if s.direct {
		msg = "copied into the table"
	}
	s.log.Debug().Str("table", s.name).Int("rows", sh.up.len()).Int64("inserted", n).Msg(msg)
	return true, nil
}

// unsupported reports whether err is PostgreSQL refusing the statement as
// a feature it does not support on the table (class 0A: COPY into a table
// with row-level security, say).
func unsupported(err error) bool { return strings.HasPrefix(sqlState(err), "0A") }

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

// inTx runs f in a transaction on conn, committed when f returns nil.
func (s *Sink) inTx(ctx context.Context, conn *pgxpool.Conn, f func(pgx.Tx) error) (err error) {
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
	return tx.Commit(ctx)
}

// count adds o to the sink's outcomes.
func (s *Sink) count(o sinks.Outcomes) {
	s.outMu.Lock()
	s.out.Add(o)
	s.outMu.Unlock()
}

// recordError is r's *record.Error for why, which follows on_error.
func (s *Sink) recordError(r *record.Record, why error) *record.Error {
	return record.NewError(r, fmt.Errorf("postgres sink: upsert into %s: %w", s.name, why))
}

// rejectsData reports whether err is the database refusing the data of a
// row, which makes the row a bad record that follows on_error: a data
// exception (class 22: bad encoding, a value out of range, JSON that
// PostgreSQL does not take), an integrity constraint violation (class 23:
// a unique index on another column, a foreign key, a check), a row too big
// for an index (54000), or an error a trigger or function raised (class
// P0: RAISE EXCEPTION without its own code, P0001; a failed ASSERT, P0004;
// SELECT INTO STRICT finding no row or several, P0002 and P0003). Any
// other class is not the row's fault: a lost connection (08), a
// serialization failure or deadlock (40001, 40P01), the server shutting
// down (57P01) or out of resources (53) pass by themselves and are retried
// (sinks.Transient); the rest fail the batch as the sink's.
func rejectsData(err error) bool {
	code := sqlState(err)
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") || code == "54000" || strings.HasPrefix(code, "P0")
}

// rejectedRows turns a failed write of w into the error Write returns.
// When the database rejected the data of a row (rejectsData), or a shard
// of a sharded Write gave up a lock wait (shardLockWait), it finds every
// row of w it rejects (isolate), remembers them (sinks'
// sqlcheckpoint.Rejected) and returns the *record.Error of the first one by
// offset. A rejection that no row causes on its own is transient: a row of
// another partition's transaction that the row waited for and that was
// then rolled back, or a lock another transaction held past lock_timeout;
// the batch is written again. Any other error is returned as it is.
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
// PostgreSQL found (40P01). The shards of a Write wait for each other
// before their commits, so a shard waiting for a row of another shard of
// the same Write (two keys on different shards with the same value in a
// unique index on another column) would wait for good; each deadlock among
// them would come back at every retry. Written through one connection
// (isolate), such a row is a constraint violation of its own, a bad
// record; a wait for another Write's rows is transient.
func shardLockWait(w *writePlan, err error) bool {
	code := sqlState(err)
	return len(w.shards) > 1 && (code == "55P03" || code == "40P01")
}

// rejectedRow is a row the database rejects, and why.
type rejectedRow struct {
	rec *record.Record
	err *record.Error
}

// isolate finds the rows of w that the database rejects, on conn (the
// Write's own connection: a sharded Write holds all it may use), in a
// transaction that is rolled back, so nothing is written. It writes w as
// Write does (each shard's deletes, then its upserts round by round), each
// part inside a savepoint; a part the database rejects is rolled back to
// its savepoint and halved, until the rejected row is alone: a batch with
// b rejected rows out of n takes about 2·b·log2(n) statements. Of two rows
// that conflict with each other (a unique index on another column), the
// later one is rejected. Deferred constraints are checked at each
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
