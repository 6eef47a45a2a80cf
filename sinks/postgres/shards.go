package postgres

import (
	"context"
	"hash/maphash"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/replay-tool/replay/internal/record"
	"golang.org/x/sync/errgroup"
)

// writeShards runs the shards at once, each in a transaction of its own,
// and commits none before every shard's statements ran: a failure in one
// rolls them all back. Then the others commit, and the first, which
// carries the checkpoint, commits after them. A failed commit can leave
// the shards that committed, which the checkpoint does not cover: a
// re-run finds their rows unchanged.
func (s *Sink) writeShards(ctx context.Context, conns []*pgxpool.Conn, w *writePlan, batch []record.Record) error {
	bar := &commitBarrier{left: len(w.shards), all: make(chan struct{})}
	// Not errgroup.WithContext: a failure must not cancel another shard's commit.
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

var shardSeed = maphash.MakeSeed()

// shardOf is the shard that writes key: always the same one for a key,
// so its records keep their order.
func (w *writePlan) shardOf(key string) *shard {
	if len(w.shards) == 1 {
		return &w.shards[0]
	}
	return &w.shards[maphash.String(shardSeed, key)%uint64(len(w.shards))]
}
