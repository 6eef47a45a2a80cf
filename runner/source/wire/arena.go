package wire

import (
	"time"

	"github.com/replay-tool/replay/internal/record"
)

// Arena hands out the byte slices of copied records from shared chunks:
// one allocation per chunk instead of two per record on the hot path. A
// chunk lives as long as any record cut from it, unless it is recycled:
// Detach hands over the chunks cut since the last call, and whoever holds
// the records gives them back (to Free) once no record cut from them is
// used any more. The zero Arena is ready to use; an Arena is used by one
// goroutine at a time.
type Arena struct {
	buf  []byte
	used [][]byte // chunks cut from since the last Detach
	// Free supplies recycled chunks of ChunkSize bytes; nil: none.
	Free chan []byte
	// hdrs is a slab the records' header slices are cut from: one
	// allocation per headerSlab headers instead of one per record.
	hdrs []record.Header
	// hkeys interns header keys (records of a topic tend to repeat them),
	// up to maxHeaderKeys of them.
	hkeys map[string]string
}

const (
	maxHeaderKeys = 256
	headerSlab    = 32
	// ChunkSize is the size of an arena chunk in bytes (64 KiB); a slice
	// larger than a quarter of it gets an allocation of its own.
	ChunkSize = 64 << 10
)

// Detach returns the chunks cut from since the last call and starts the
// next record in a new chunk, so that no chunk is shared between two
// callers of Detach. A chunk of ChunkSize bytes may go back to Free once
// no slice cut from it is used; a larger one is a single record's.
func (a *Arena) Detach() [][]byte {
	used := a.used
	a.used, a.buf = nil, nil
	return used
}

// chunk returns a recycled chunk, or a new one.
func (a *Arena) chunk() []byte {
	select {
	case c := <-a.Free:
		return c
	default:
		return make([]byte, ChunkSize)
	}
}

// Take returns a slice of n bytes (nil for a null key or value: n < 0;
// empty, not nil, for 0).
func (a *Arena) Take(n int) []byte {
	if n < 0 {
		return nil
	}
	if n == 0 {
		return []byte{} // empty, not null
	}
	if n > len(a.buf) {
		if n > ChunkSize/4 {
			big := make([]byte, n)
			a.used = append(a.used, big) // held and charged like a chunk, never recycled
			return big
		}
		a.buf = a.chunk()
		a.used = append(a.used, a.buf)
	}
	s := a.buf[:n:n]
	a.buf = a.buf[n:]
	return s
}

// Bytes copies src into the arena (nil stays nil: null).
func (a *Arena) Bytes(src []byte) []byte {
	if src == nil {
		return nil
	}
	s := a.Take(len(src))
	copy(s, src)
	return s
}

// Headers returns a slice of n headers cut from a shared slab.
func (a *Arena) Headers(n int) []record.Header {
	if len(a.hdrs) < n {
		a.hdrs = make([]record.Header, max(n, headerSlab))
	}
	hs := a.hdrs[:n:n]
	a.hdrs = a.hdrs[n:]
	return hs
}

// headerKey returns key as a string, interned.
func (a *Arena) headerKey(key []byte) string {
	if k, ok := a.hkeys[string(key)]; ok {
		return k
	}
	k := string(key)
	if a.hkeys == nil {
		a.hkeys = map[string]string{}
	}
	if len(a.hkeys) < maxHeaderKeys {
		a.hkeys[k] = k
	}
	return k
}

// Copy copies rec out of the fetched (or decompressed) bytes into a
// record.Record of topic's partition and returns its size in bytes (key,
// value and headers). An error is a malformed header (ErrMalformedRecord).
func (a *Arena) Copy(topic string, partition int32, rec *Record) (record.Record, int, error) {
	key, val := a.Bytes(rec.Key), a.Bytes(rec.Value)
	n := len(key) + len(val)
	var hs []record.Header
	if rec.NumHeaders > 0 {
		hs = a.Headers(rec.NumHeaders)
		p := rec.Headers
		for i := range hs {
			k, v, rest, err := NextHeader(p)
			if err != nil {
				return record.Record{}, 0, err
			}
			p = rest
			hs[i] = record.Header{Key: a.headerKey(k), Value: a.Bytes(v)}
			n += len(k) + len(v)
		}
	}
	return record.Record{Topic: topic, Partition: partition, Offset: rec.Offset, Time: time.UnixMilli(rec.Time), Key: key, Value: val, Headers: hs}, n, nil
}
