package parquet

import (
	"context"
	"fmt"
	"io"
	"runtime"

	pq "github.com/parquet-go/parquet-go"

	"github.com/replay-tool/replay/internal/record"
)

// rowChunk is how many staged records are turned into rows at a time.
const rowChunk = 256

// chunk is a run of staged records and their rows, in offset order.
type chunk struct {
	recs []record.Record
	rows []pq.Row
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
func (s *Sink) writeRows(ctx context.Context, w *pq.GenericWriter[any], src io.Reader, p int32) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, min(runtime.GOMAXPROCS(0), 4))
	todo := make(chan *chunk, workers)
	ordered := make(chan *chunk, workers)
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(todo)
		readErr <- s.readChunks(ctx, src, p, todo, ordered)
	}()
	for range workers {
		go func() {
			for c := range todo {
				c.rows = make([]pq.Row, len(c.recs))
				for i := range c.recs {
					if c.rows[i], c.err = row(nil, s.cols, &c.recs[i]); c.err != nil {
						break
					}
				}
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
		if group += c.bytes; group >= rowGroupBytes {
			if err := w.Flush(); err != nil {
				return rows, err
			}
			group = 0
		}
	}
	return rows, <-readErr
}

// readChunks reads the staged records of src in chunks of rowChunk,
// handing each chunk to todo (to make its rows) and to ordered (to write
// them in order), until src ends or ctx is done.
func (s *Sink) readChunks(ctx context.Context, src io.Reader, p int32, todo, ordered chan<- *chunk) error {
	fr := newFrameReader(src, s.topic, p)
	for {
		c := &chunk{recs: make([]record.Record, 0, rowChunk), done: make(chan struct{})}
		fr.arena = make([]byte, 0, 128<<10) // the chunk's records point into it
		var err error
		for len(c.recs) < rowChunk {
			var r record.Record
			if r, err = fr.next(); err != nil {
				break
			}
			c.bytes += int64(len(r.Value) + len(r.Key) + 64)
			c.recs = append(c.recs, r)
		}
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
