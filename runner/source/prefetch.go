package source

import (
	"context"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source/wire"
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
	// Starved says that the readers' memory (FetchBudget) is used up and
	// that this partition's next fetch waits for some to be released: the
	// worker should write the records it holds now rather than wait for a
	// full batch. A starved Fetched carries no records.
	Starved bool
}

// Prefetcher keeps one Fetch in flight ahead of a partition's writer: while
// the worker writes and commits one response, the next is on its way. It
// owns the reader; the reader must not be used until Stop returns. Every
// response is charged to the Cluster's FetchBudget until the worker gives
// its chunks back (Release).
type Prefetcher struct {
	ch     chan Fetched
	cancel context.CancelFunc
	done   chan struct{}
	mem    *readerMemory
	// held maps the first chunk of each response not yet released to the
	// bytes it was charged.
	mu   sync.Mutex
	held map[*byte]int64
}

// Prefetch starts the fetch loop of r; it ends after the range is done,
// after an error (sent as the last Fetched), or when ctx is cancelled. Its
// responses come on C.
func Prefetch(ctx context.Context, r *Reader) *Prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	mem := r.c.memory()
	p := &Prefetcher{ch: make(chan Fetched), cancel: cancel, done: make(chan struct{}), mem: mem, held: map[*byte]int64{}}
	r.arena.Free = mem.chunks
	go func() {
		defer close(p.done)
		defer close(p.ch)
		for !r.Done() {
			reserve := fetchReserve(r.maxBytes, r.ratio)
			if !mem.budget.tryAcquire(reserve) {
				select {
				case p.ch <- Fetched{Next: r.next, Starved: true}:
				case <-ctx.Done():
					return
				}
				if mem.budget.acquire(ctx, reserve) != nil {
					return
				}
			}
			var out []record.Record
			select {
			case out = <-mem.recs:
			default:
			}
			recs, err := r.Fetch(ctx, out)
			f := Fetched{Recs: recs, Next: r.next, Err: err, Chunks: r.arena.Detach()}
			p.charge(f)
			mem.budget.release(reserve) // the response itself is decoded and gone
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

// charge charges f's chunks and records to the budget until Release.
func (p *Prefetcher) charge(f Fetched) {
	if len(f.Chunks) == 0 {
		return // no bytes held (no records, or only empty keys and values): the slices are recycled
	}
	n := int64(len(f.Recs)) * recordCost
	for _, c := range f.Chunks {
		n += int64(cap(c))
	}
	p.mem.budget.charge(n)
	p.mu.Lock()
	p.held[unsafeFirst(f.Chunks[0])] = n
	p.mu.Unlock()
}

func unsafeFirst(c []byte) *byte { return &c[:1][0] }

// C delivers the responses in order; it is closed when the loop ends.
func (p *Prefetcher) C() <-chan Fetched { return p.ch }

// Reuse gives back a slice of records the worker has copied out of: a
// reader fills it again (its records' bytes are not touched).
func (p *Prefetcher) Reuse(recs []record.Record) {
	if cap(recs) == 0 {
		return
	}
	clear(recs[:cap(recs)]) // the slice must not keep the records' bytes alive
	select {
	case p.mem.recs <- recs[:0]:
	default:
	}
}

// Release gives back the chunks of a Fetched whose records are no longer
// used: written by the sink (which keeps no byte slice of a batch), dead
// lettered or dropped. Their bytes return to the budget and readers cut
// new records from them.
func (p *Prefetcher) Release(chunks [][]byte) {
	if len(chunks) == 0 {
		return
	}
	p.mu.Lock()
	n, ok := p.held[unsafeFirst(chunks[0])]
	delete(p.held, unsafeFirst(chunks[0]))
	p.mu.Unlock()
	if !ok {
		return // released already (Stop)
	}
	p.mem.budget.release(n)
	for _, c := range chunks {
		if cap(c) != wire.ChunkSize {
			continue // a large record's own slice
		}
		select {
		case p.mem.chunks <- c[:wire.ChunkSize]:
		default:
		}
	}
}

// Stop cancels the fetch in flight, waits for the loop to end and gives
// back to the budget whatever the worker did not release.
func (p *Prefetcher) Stop() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, n := range p.held {
		p.mem.budget.release(n)
		delete(p.held, k)
	}
}
