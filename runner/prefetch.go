package runner

import (
	"context"

	"github.com/replay-tool/replay/sinks"
)

// fetched is one Fetch response's worth of records and the reader's
// position after it (records, markers and aborted data consumed).
type fetched struct {
	recs []sinks.Record
	next int64
	err  error
}

// prefetcher keeps one Fetch in flight ahead of a partition's writer: while
// the worker writes and commits one response, the next is on its way. It
// owns the reader; the reader must not be used until stop returns.
type prefetcher struct {
	ch     chan fetched
	cancel context.CancelFunc
	done   chan struct{}
}

// startPrefetch starts the fetch loop of r; it ends after the range is done,
// after an error (sent as the last fetched), or when ctx is cancelled.
func startPrefetch(ctx context.Context, r *partitionReader) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetcher{ch: make(chan fetched, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer close(p.ch)
		for !r.done() {
			recs, err := r.fetch(ctx, nil)
			select {
			case p.ch <- fetched{recs: recs, next: r.next, err: err}:
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

// stop cancels the fetch in flight and waits for the loop to end.
func (p *prefetcher) stop() {
	p.cancel()
	<-p.done
}
