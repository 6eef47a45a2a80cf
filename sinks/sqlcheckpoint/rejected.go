package sqlcheckpoint

import (
	"hash/maphash"
	"sync"

	"github.com/replay-tool/replay/internal/record"
)

// Rejected remembers, per partition, the records of the partition's last
// failed Write that the database rejected, each with its *record.Error. A
// Write reports one bad record and writes nothing (the Sink contract); the
// runner then writes the batch again without it, and the sink answers that
// Write with the next remembered one at once instead of finding it in the
// database again. The batch without any of them is written as usual, in
// one transaction. A record is known by its offset and a hash of its key,
// value and headers. Safe for concurrent use.
type Rejected struct {
	mu sync.Mutex
	by map[partition]map[int64]rejection
}

type partition struct {
	topic string
	part  int32
}

type rejection struct {
	sum uint64
	err *record.Error
}

var seed = maphash.MakeSeed()

// sum hashes what a row is made of besides its offset.
func sum(r *record.Record) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	field := func(b []byte) {
		n := len(b) + 1 // 0: null
		if b == nil {
			n = 0
		}
		_, _ = h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
		_, _ = h.Write(b)
	}
	field(r.Key)
	field(r.Value)
	for _, hd := range r.Headers {
		field([]byte(hd.Key))
		field(hd.Value)
	}
	return h.Sum64()
}

// Remember replaces what is remembered of the partition of recs (at
// least one, all of one partition) with recs, rejected for errs (one each).
func (r *Rejected) Remember(recs []*record.Record, errs []*record.Error) {
	m := make(map[int64]rejection, len(recs))
	for i, rec := range recs {
		m[rec.Offset] = rejection{sum(rec), errs[i]}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[partition]map[int64]rejection{}
	}
	r.by[partition{recs[0].Topic, recs[0].Partition}] = m
}

// First returns the error remembered for the first record of batch (not
// empty, of one partition) that has one; when none has, it forgets the
// partition's and returns nil.
func (r *Rejected) First(batch []record.Record) error {
	p := partition{batch[0].Topic, batch[0].Partition}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.by[p]
	if m == nil {
		return nil
	}
	for i := range batch {
		if rj, ok := m[batch[i].Offset]; ok && rj.sum == sum(&batch[i]) {
			return rj.err
		}
	}
	delete(r.by, p)
	return nil
}
