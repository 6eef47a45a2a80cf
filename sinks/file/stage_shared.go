package file

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// sharedStager stages every partition in one file, records.jsonl
// (Config.Interleave), so its lines interleave partitions, each
// partition's in offset order. A re-delivered record (offset below what the
// file holds for its partition) is dropped: the file already holds the same
// line. Finish publishes the file by a hard link: the output is written to
// disk once. Its lines are the output's, JSONL (AppendJSONL), encoded in
// pieces of a batch (sharedPiece): the interleaved layout serves JSONL only.
type sharedStager struct {
	mu     *sync.Mutex // Sink.mu
	dir    string
	format encode.ValueFormat // of the values (CheckBatch before any piece)
	// parts holds each partition's encoding buffer (filePart.f is nil),
	// guarded by mu.
	parts map[int32]*filePart
	// shared is the staging file, once opened by this process; guarded by
	// mu (set before the first part is opened, cleared by close).
	shared *sharedStage
	// floor is the largest durable position the group's commits recorded
	// (CheckResume): recovery may cut a damaged staging file past it, never
	// below.
	floor int64
}

var _ stager = (*sharedStager)(nil)

func newSharedStager(mu *sync.Mutex, dir string, format encode.ValueFormat) *sharedStager {
	return &sharedStager{mu: mu, dir: dir, format: format, parts: map[int32]*filePart{}}
}

// path is the staging file.
func (st *sharedStager) path() string { return filepath.Join(st.dir, "records.jsonl") }

func (st *sharedStager) file(int32) string { return st.path() }

func (st *sharedStager) opened(p int32) *filePart { return st.parts[p] }

func (st *sharedStager) active() bool { return len(st.parts) > 0 }

func (st *sharedStager) setFloor(floor int64) { st.floor = max(st.floor, floor) }

func (st *sharedStager) open(p int32) (*filePart, error) {
	if st.shared == nil {
		sh, err := openShared(st.path(), st.floor)
		if err != nil {
			return nil, fmt.Errorf("file sink: %s: %w", st.path(), err)
		}
		st.shared = sh
	}
	fp := &filePart{next: -1}
	st.parts[p] = fp
	return fp, nil
}

// sharedPiece is how much of a batch write encodes before writing it: the
// encoding buffer of each partition stays this small whatever the batch
// size.
const sharedPiece = 128 << 10

// write appends batch to the staging file, without the records it already
// holds (a re-delivery), in pieces of whole lines. A failure after some
// pieces leaves them written: the runner delivers the batch again and they
// are skipped.
func (st *sharedStager) write(fp *filePart, batch []record.Record) error {
	if err := encode.CheckBatch(batch, st.format); err != nil {
		return err // before any piece: a bad record writes nothing
	}
	sh := st.shared
	p := batch[0].Partition
	sh.mu.Lock()
	next, seen := sh.next[p]
	broken := sh.broken
	sh.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("file sink: write partition %d: an earlier write failed and could not be undone: %w", p, broken)
	}
	if seen {
		batch = batch[sort.Search(len(batch), func(i int) bool { return batch[i].Offset >= next }):]
	}
	for len(batch) > 0 {
		fp.lb.reset()
		n := 0
		for n < len(batch) && len(fp.lb.buf) < sharedPiece {
			fp.lb.buf = encode.AppendJSONLChecked(fp.lb.buf, &batch[n], st.format)
			n++
		}
		if err := sh.append(fp.lb.buf, p, batch[n-1].Offset+1); err != nil {
			return err
		}
		batch = batch[n:]
	}
	fp.lb.release()
	return nil
}

func (st *sharedStager) sync(_ *filePart, p int32) error {
	if err := st.shared.sync(); err != nil {
		return fmt.Errorf("file sink: fsync partition %d: %w", p, err)
	}
	return nil
}

// synced is the same for every partition: one fsync covers them all.
func (st *sharedStager) synced(int32) int64 {
	st.mu.Lock()
	sh := st.shared
	st.mu.Unlock()
	if sh == nil {
		return 0
	}
	sh.syncMu.Lock()
	defer sh.syncMu.Unlock()
	return sh.syncedSize
}

// published is the largest durable position: each is a position in the
// one staging file, which the output is.
func (st *sharedStager) published(past []sinks.ResumePoint) int64 {
	var n int64
	for _, p := range past {
		n = max(n, p.Position)
	}
	return n
}

func (st *sharedStager) close() error {
	clear(st.parts)
	if st.shared == nil {
		return nil
	}
	err := st.shared.f.Close()
	st.shared = nil
	return err
}

// sharedStage is the one staging file every partition of an interleaved
// file sink appends to. Writes are serialized and each is complete lines of
// one partition, so the file is always complete lines up to size; a write
// that fails is cut off again.
type sharedStage struct {
	mu   sync.Mutex // guards the fields below and the writes to f
	f    *os.File
	size int64 // end of the last complete write
	// next is, per partition, the offset after its last line in f: a
	// re-delivered record below it is already there.
	next   map[int32]int64
	writes uint64 // writes completed
	// broken is a failed write that could not be cut off: f may hold a torn
	// line before later writes, so nothing more is written.
	broken error

	syncMu sync.Mutex // one fsync at a time; guards synced, syncedSize and syncErr
	synced uint64     // writes covered by the last successful fsync
	// syncedSize is size at the last successful fsync: durable.
	syncedSize int64
	// syncErr is sticky: after a failed fsync the kernel may have dropped
	// pages of any partition, and the next fsync would report success.
	syncErr error
}

// append writes lines, complete lines of partition p ending before offset
// next, at the end of the file.
func (st *sharedStage) append(lines []byte, p int32, next int64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.broken != nil {
		return fmt.Errorf("file sink: write partition %d: an earlier write failed and could not be undone: %w", p, st.broken)
	}
	if _, err := st.f.WriteAt(lines, st.size); err != nil {
		if terr := st.f.Truncate(st.size); terr != nil {
			st.broken = terr
		}
		return fmt.Errorf("file sink: write partition %d: %w", p, err)
	}
	st.size += int64(len(lines))
	st.next[p] = next
	st.writes++
	return nil
}

// sync makes every write completed before the call durable. One fsync
// covers the writes of all partitions, so a call whose writes an fsync
// already covered returns at once.
func (st *sharedStage) sync() error {
	st.mu.Lock()
	want := st.writes
	st.mu.Unlock()
	st.syncMu.Lock()
	defer st.syncMu.Unlock()
	if st.syncErr != nil {
		return st.syncErr
	}
	if st.synced >= want {
		return nil
	}
	st.mu.Lock()
	upto, size := st.writes, st.size
	st.mu.Unlock()
	if err := st.f.Sync(); err != nil {
		st.syncErr = err
		return err
	}
	st.synced, st.syncedSize = upto, size
	return nil
}
