package parquet

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
)

// rowChunk is how many staged records are turned into rows at a time.
const rowChunk = 256

// chunk is a run of staged records and their rows, in offset order.
type chunk struct {
	recs []record.Record
	rows []pq.Row
	// arena holds the records' bytes and vals their rows' values: both
	// kept when the chunk is used again.
	arena []byte
	hdrs  []record.Header
	vals  []pq.Value
	// bytes is what the records' keys and values weigh (the row-group
	// budget counts it); err is why a row could not be made.
	bytes int64
	err   error
	done  chan struct{}
}

// writeRows writes the rows of the staged records src holds to w, in
// offset order, flushing a row group every rowGroupBytes of values, and
// returns how many. The rows are made by up to GOMAXPROCS goroutines, a
// chunk of records each, while this one writes the chunks' rows in order.
func (s *Sink) writeRows(ctx context.Context, w *pq.GenericWriter[any], src io.Reader, p int32, cols []column) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, min(runtime.GOMAXPROCS(0), 4))
	todo := make(chan *chunk, workers)
	ordered := make(chan *chunk, workers)
	// A chunk whose rows are written is used again: the writer copied
	// its values.
	free := make(chan *chunk, 2*workers+2)
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(todo)
		readErr <- s.readChunks(ctx, src, p, free, todo, ordered)
	}()
	for range workers {
		go func() {
			for c := range todo {
				c.rows = slices.Grow(c.rows[:0], len(c.recs))[:len(c.recs)]
				vals := slices.Grow(c.vals[:0], len(c.recs)*len(cols)) // the chunk's rows, in one block
				for i := range c.recs {
					if c.rows[i], c.err = row(vals[len(vals):], cols, &c.recs[i]); c.err != nil {
						break
					}
					vals = vals[:len(vals)+len(c.rows[i])]
				}
				c.vals = vals
				close(c.done)
			}
		}()
	}
	var rows, group int64
	for c := range ordered {
		select {
		case <-c.done:
		case <-ctx.Done():
			return rows, ctx.Err()
		}
		if c.err != nil {
			return rows, c.err
		}
		if _, err := w.WriteRows(c.rows); err != nil {
			return rows, err
		}
		rows += int64(len(c.rows))
		group += c.bytes
		if cap(c.arena) <= 2*rowGroupBytes { // one grown by a large record is dropped
			select { // the chunk is the reader's again: nothing of it is read after
			case free <- c:
			default:
			}
		}
		if group >= rowGroupBytes {
			if err := w.Flush(); err != nil {
				return rows, err
			}
			group = 0
		}
	}
	return rows, <-readErr
}

// readChunks reads the staged records of src in chunks of rowChunk
// records or rowGroupBytes of values, whichever comes first, handing each
// chunk to todo (to make its rows) and to ordered (to write them in
// order), until src ends or ctx is done.
func (s *Sink) readChunks(ctx context.Context, src io.Reader, p int32, free <-chan *chunk, todo, ordered chan<- *chunk) error {
	fr := newFrameReader(src, s.topic, p)
	for {
		var c *chunk
		select {
		case c = <-free:
			c.recs, c.bytes, c.err = c.recs[:0], 0, nil
		default:
			c = &chunk{recs: make([]record.Record, 0, rowChunk), arena: make([]byte, 0, 128<<10)}
		}
		c.done = make(chan struct{})
		fr.arena, fr.hdrs = c.arena[:0], c.hdrs[:0] // the chunk's records point into them
		var err error
		for len(c.recs) < rowChunk && c.bytes < rowGroupBytes {
			var r record.Record
			if r, err = fr.next(); err != nil {
				break
			}
			c.bytes += int64(len(r.Value) + len(r.Key) + 64)
			c.recs = append(c.recs, r)
		}
		c.arena, c.hdrs = fr.arena, fr.hdrs
		if len(c.recs) > 0 {
			for _, ch := range []chan<- *chunk{ordered, todo} {
				select {
				case ch <- c:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("read the staged records: %w", err)
		}
	}
}
