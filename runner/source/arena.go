package source

import (
	"io"
	"time"

	"github.com/segmentio/kafka-go/protocol"

	"github.com/replay-tool/replay/internal/record"
)

// arena hands out the byte slices of copied records from shared chunks:
// one allocation per chunk instead of two per record on the hot path. A
// chunk lives as long as any record cut from it, unless it is recycled:
// detach hands over the chunks cut since the last call, and whoever holds
// the records gives them back through free once no record cut from them is
// used any more (the prefetcher's worker, after the sink wrote them).
type arena struct {
	buf  []byte
	used [][]byte    // chunks cut from since the last detach
	free chan []byte // recycled chunks; nil: none
	// hdrs is a slab the records' header slices are cut from: one
	// allocation per headerSlab headers instead of one per record.
	hdrs []record.Header
	// hkeys interns header keys (records of a topic tend to repeat them),
	// up to maxHeaderKeys of them.
	hkeys map[string]string
}

const maxHeaderKeys = 256

const headerSlab = 32

const arenaChunk = 64 << 10

// detach returns the chunks cut from since the last call and starts the
// next record in a new chunk, so that no chunk is shared between two
// callers of detach.
func (a *arena) detach() [][]byte {
	used := a.used
	a.used, a.buf = nil, nil
	return used
}

// chunk returns a recycled chunk, or a new one.
func (a *arena) chunk() []byte {
	select {
	case c := <-a.free:
		return c
	default:
		return make([]byte, arenaChunk)
	}
}

// take returns a slice of n bytes (nil for a null key or value: n < 0).
func (a *arena) take(n int) []byte {
	if n < 0 {
		return nil
	}
	if n == 0 {
		return []byte{} // empty, not null
	}
	if n > len(a.buf) {
		if n > arenaChunk/4 {
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

func (a *arena) read(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	s := a.take(b.Len())
	_, err := io.ReadFull(b, s)
	return s, err
}

// copyRecord copies rec (a record set older than magic 2, decoded by
// kafka-go) out of kafka-go's pooled pages into a record.Record
// and returns its size in bytes (key, value and headers).
func (a *arena) copyRecord(topic string, partition int32, rec *protocol.Record) (record.Record, int, error) {
	defer closeRecord(rec)
	key, err := a.read(rec.Key)
	if err != nil {
		return record.Record{}, 0, err
	}
	val, err := a.read(rec.Value)
	if err != nil {
		return record.Record{}, 0, err
	}
	n := len(key) + len(val)
	var hs []record.Header
	if n := len(rec.Headers); n > 0 {
		if len(a.hdrs) < n {
			a.hdrs = make([]record.Header, max(n, headerSlab))
		}
		hs, a.hdrs = a.hdrs[:n:n], a.hdrs[n:]
		for i, h := range rec.Headers {
			v := a.take(len(h.Value))
			copy(v, h.Value)
			if h.Value == nil {
				v = nil
			}
			hs[i] = record.Header{Key: h.Key, Value: v}
			n += len(h.Key) + len(h.Value)
		}
	}
	return record.Record{Topic: topic, Partition: partition, Offset: rec.Offset, Time: rec.Time, Key: key, Value: val, Headers: hs}, n, nil
}

// bytes copies src into the arena (nil stays nil: null).
func (a *arena) bytes(src []byte) []byte {
	if src == nil {
		return nil
	}
	s := a.take(len(src))
	copy(s, src)
	return s
}

// headerKey returns key as a string, interned.
func (a *arena) headerKey(key []byte) string {
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

// copyV2 copies a record of a magic-2 batch (batch.go) out of the fetched
// bytes into a record.Record and returns its size in bytes (key, value and
// headers).
func (a *arena) copyV2(topic string, partition int32, rec *v2Record) (record.Record, int, error) {
	key, val := a.bytes(rec.key), a.bytes(rec.value)
	n := len(key) + len(val)
	var hs []record.Header
	if rec.nhdrs > 0 {
		if len(a.hdrs) < rec.nhdrs {
			a.hdrs = make([]record.Header, max(rec.nhdrs, headerSlab))
		}
		hs, a.hdrs = a.hdrs[:rec.nhdrs:rec.nhdrs], a.hdrs[rec.nhdrs:]
		p := rec.headers
		for i := range hs {
			k, v, rest, err := nextHeader(p)
			if err != nil {
				return record.Record{}, 0, err
			}
			p = rest
			hs[i] = record.Header{Key: a.headerKey(k), Value: a.bytes(v)}
			n += len(k) + len(v)
		}
	}
	return record.Record{Topic: topic, Partition: partition, Offset: rec.offset, Time: time.UnixMilli(rec.time), Key: key, Value: val, Headers: hs}, n, nil
}

func closeRecord(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}
