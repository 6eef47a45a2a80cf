package runner

import (
	"context"

	"github.com/replay-tool/replay/internal/record"
)

// fetched is one Fetch response's worth of records and the reader's
// position after it (records, markers and aborted data consumed).
type fetched struct {
	recs []record.Record
	next int64
	err  error
	// chunks hold the bytes of recs and of no other fetched (arena.detach):
	// give them back with prefetcher.release once recs are written.
	chunks [][]byte
}

// prefetcher keeps one Fetch in flight ahead of a partition's writer: while
// the worker writes and commits one response, the next is on its way. It
// owns the reader; the reader must not be used until stop returns.
//
// It recycles what the worker is done with: the slices of records (reuse)
// and the arena chunks their bytes were cut from (release), which would
// otherwise be garbage after every response.
type prefetcher struct {
	ch     chan fetched
	cancel context.CancelFunc
	done   chan struct{}
	recs   chan []record.Record // record slices to fill again
	chunks chan []byte          // the reader's arena.free
}

// Recycled buffers kept per partition: enough for the records and chunks
// in flight between a reader and its worker (a batch pending, one response
// ahead); the GC takes the rest.
const (
	recycledRecordSlices = 2
	recycledChunks       = 8
)

// startPrefetch starts the fetch loop of r; it ends after the range is done,
// after an error (sent as the last fetched), or when ctx is cancelled.
func startPrefetch(ctx context.Context, r *partitionReader) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetcher{ch: make(chan fetched), cancel: cancel, done: make(chan struct{}),
		recs: make(chan []record.Record, recycledRecordSlices), chunks: make(chan []byte, recycledChunks)}
	r.arena.free = p.chunks
	go func() {
		defer close(p.done)
		defer close(p.ch)
		for !r.done() {
			var out []record.Record
			select {
			case out = <-p.recs:
			default:
			}
			recs, err := r.fetch(ctx, out)
			f := fetched{recs: recs, next: r.next, err: err, chunks: r.arena.detach()}
			select {
			case p.ch <- f:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// reuse gives back a slice of records the worker has copied out of: the
// reader fills it again (its records' bytes are not touched).
func (p *prefetcher) reuse(recs []record.Record) {
	if cap(recs) == 0 {
		return
	}
	select {
	case p.recs <- recs[:0]:
	default:
	}
}

// release gives back the chunks of a fetched whose records are no longer
// used: written by the sink (which keeps no byte slice of a batch), dead
// lettered or dropped. The reader cuts new records from them.
func (p *prefetcher) release(chunks [][]byte) {
	for _, c := range chunks {
		select {
		case p.chunks <- c:
		default:
			return
		}
	}
}

// stop cancels the fetch in flight and waits for the loop to end.
func (p *prefetcher) stop() {
	p.cancel()
	<-p.done
}
