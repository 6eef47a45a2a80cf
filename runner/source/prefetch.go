package source

import (
	"context"

	"github.com/replay-tool/replay/internal/record"
)

// Fetched is one Fetch response's worth of records and the reader's
// position after it (records, markers and aborted data consumed).
type Fetched struct {
	Recs []record.Record
	Next int64
	// Err is the fetch's failure; it is the last Fetched sent.
	Err error
	// Chunks hold the bytes of Recs and of no other Fetched: give them
	// back with Prefetcher.Release once Recs are no longer used.
	Chunks [][]byte
}

// Prefetcher keeps one Fetch in flight ahead of a partition's writer: while
// the worker writes and commits one response, the next is on its way. It
// owns the reader; the reader must not be used until Stop returns.
//
// It recycles what the worker is done with: the slices of records (Reuse)
// and the arena chunks their bytes were cut from (Release), which would
// otherwise be garbage after every response.
type Prefetcher struct {
	ch     chan Fetched
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

// Prefetch starts the fetch loop of r; it ends after the range is done,
// after an error (sent as the last Fetched), or when ctx is cancelled. Its
// responses come on C.
func Prefetch(ctx context.Context, r *Reader) *Prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	p := &Prefetcher{ch: make(chan Fetched), cancel: cancel, done: make(chan struct{}),
		recs: make(chan []record.Record, recycledRecordSlices), chunks: make(chan []byte, recycledChunks)}
	r.arena.free = p.chunks
	go func() {
		defer close(p.done)
		defer close(p.ch)
		for !r.Done() {
			var out []record.Record
			select {
			case out = <-p.recs:
			default:
			}
			recs, err := r.Fetch(ctx, out)
			f := Fetched{Recs: recs, Next: r.next, Err: err, Chunks: r.arena.detach()}
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

// C delivers the responses in order; it is closed when the loop ends.
func (p *Prefetcher) C() <-chan Fetched { return p.ch }

// Reuse gives back a slice of records the worker has copied out of: the
// reader fills it again (its records' bytes are not touched).
func (p *Prefetcher) Reuse(recs []record.Record) {
	if cap(recs) == 0 {
		return
	}
	select {
	case p.recs <- recs[:0]:
	default:
	}
}

// Release gives back the chunks of a Fetched whose records are no longer
// used: written by the sink (which keeps no byte slice of a batch), dead
// lettered or dropped. The reader cuts new records from them.
func (p *Prefetcher) Release(chunks [][]byte) {
	for _, c := range chunks {
		select {
		case p.chunks <- c:
		default:
			return
		}
	}
}

// Stop cancels the fetch in flight and waits for the loop to end.
func (p *Prefetcher) Stop() {
	p.cancel()
	<-p.done
}
