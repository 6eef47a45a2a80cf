package source

import (
	"context"
	"slices"
	"sync"
	"unsafe"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/runner/source/wire"
)

// FetchBudget bounds, in bytes, what the readers of one Cluster hold at
// once over all partitions: the responses in flight (each reserves before
// it is sent) and the records fetched but not yet released by the worker.
// A reader that cannot reserve its next fetch tells its worker
// (Fetched.Starved) to write what it holds, and waits.
//
// A response is charged for what it decoded to, so the budget may run over
// by the responses on the wire at once: each brings at least one whole
// batch, however much larger than the fetch size (KIP-74). While it is
// over, new fetches wait, except when nothing at all is held (so a single
// huge batch is still read).
var FetchBudget int64 = 8 << 20

// recordCost is what one fetched record costs besides its bytes: the
// record in the fetched slice and its copy in the worker's pending batch.
const recordCost = 2 * int64(unsafe.Sizeof(record.Record{}))

// fetchReserve is what a fetch of maxBytes reserves before it is sent: an
// estimate of what its response decodes to, ratio being what a fetched
// byte of the partition decoded to so far (about 4 for zstd JSON).
func fetchReserve(maxBytes int32, ratio float64) int64 {
	return 2*int64(float64(maxBytes)*max(ratio, 1)) + wire.ChunkSize
}

// memBudget is a counting semaphore of bytes (FetchBudget). Waiters are
// served in order, one wake-up each: with thousands of partitions waiting,
// a release must not wake them all.
type memBudget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newMemBudget(limit int64) *memBudget { return &memBudget{limit: limit} }

// fits reports whether n more bytes fit (always when nothing is held).
func (b *memBudget) fits(n int64) bool { return b.used == 0 || b.used+n <= b.limit }

// tryAcquire takes n bytes if they fit and nobody waits before.
func (b *memBudget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || !b.fits(n) {
		return false
	}
	b.used += n
	return true
}

// acquire takes n bytes, waiting in line until they fit.
func (b *memBudget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
		default:
			i := slices.Index(b.waiters, w)
			b.waiters = slices.Delete(b.waiters, i, i+1)
		}
		b.grant() // the next in line may fit now
		return ctx.Err()
	}
}

// grant serves the waiters in order while their bytes fit; b.mu is held.
func (b *memBudget) grant() {
	for len(b.waiters) > 0 && b.fits(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// charge takes n bytes without waiting (what a response decoded to).
func (b *memBudget) charge(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// release gives n bytes back and serves the waiters they let in.
func (b *memBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// inUse returns the bytes held.
func (b *memBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Shared recycling of the readers' buffers, per Cluster: a bounded number
// of arena chunks and record slices, whatever the number of partitions.
const (
	sharedChunks       = 64 // 4 MiB of 64 KiB chunks
	sharedRecordSlices = 16
)

// maxFetchesInFlight bounds the Fetch requests of one Cluster on the wire
// at once (kafka-go opens a connection per concurrent request); two per
// fetch transport keep every transport busy.
var maxFetchesInFlight = 2 * fetchConns

// readerMemory is what the readers of a Cluster share: the budget and the
// recycled buffers.
type readerMemory struct {
	budget *memBudget
	// inFlight holds a token per Fetch on the wire (maxFetchesInFlight).
	inFlight chan struct{}
	chunks   chan []byte
	recs     chan []record.Record
}

// memory returns the Cluster's shared reader memory, made on first use.
func (c *Cluster) memory() *readerMemory {
	c.memOnce.Do(func() {
		c.mem = &readerMemory{budget: newMemBudget(FetchBudget), inFlight: make(chan struct{}, maxFetchesInFlight), chunks: make(chan []byte, sharedChunks),
			recs: make(chan []record.Record, sharedRecordSlices)}
	})
	return c.mem
}

// FetchMemory returns the bytes the Cluster's readers hold against
// FetchBudget: reserved for fetches in flight or held by records not yet
// released. It is 0 once every partition's prefetcher has stopped.
func (c *Cluster) FetchMemory() int64 { return c.memory().budget.inUse() }
