package file

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// sharedStager stages every partition in one JSONL file, records.jsonl
// (Config.Interleave); see Sink.
type sharedStager struct {
	stagedParts // parts hold the shared file and each partition's encoding buffer
	format      encode.ValueFormat
	shared      *sharedStage // the staging file, once opened; guarded by mu
	floor       int64        // see setFloor
}

func (st *sharedStager) path() string { return filepath.Join(st.dir, "records.jsonl") }

func (st *sharedStager) file(int32) string { return st.path() }

func (st *sharedStager) setFloor(floor int64) { st.floor = max(st.floor, floor) }

func (st *sharedStager) open(p int32) (*filePart, error) {
	if st.shared == nil {
		var err error
		if st.shared, err = openShared(st.path(), st.floor); err != nil {
			return nil, fmt.Errorf("file sink: %s: %w", st.path(), err)
		}
	}
	fp := &filePart{f: st.shared.f, next: -1}
	st.parts[p] = fp
	return fp, nil
}

// sharedPiece bounds the bytes write encodes before writing them.
const sharedPiece = 128 << 10

// write appends batch, less the records the file holds already, in pieces
// of whole lines; pieces written before a failure are skipped when the
// batch is delivered again.
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

func (st *sharedStager) close() error {
	clear(st.parts)
	if st.shared == nil {
		return nil
	}
	err := st.shared.f.Close()
	st.shared = nil
	return err
}

// sharedStage is the staging file of a sharedStager. Writes are serialized,
// each complete lines of one partition; a write that fails is cut off.
type sharedStage struct {
	mu     sync.Mutex // guards the fields below and the writes to f
	f      *os.File
	size   int64           // end of the last complete write
	next   map[int32]int64 // per partition, the offset after its last line
	writes uint64          // writes completed
	// broken is a failed write that could not be cut off: nothing more is
	// written after a torn line.
	broken error

	syncMu     sync.Mutex // one fsync at a time; guards the fields below
	synced     uint64     // writes covered by the last successful fsync
	syncedSize int64      // size then: durable
	syncErr    error      // sticky, as filePart.syncErr
}

// append writes lines, of partition p up to offset next, at the end.
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

// sync makes every write completed before the call durable, at once when
// an fsync covered them already.
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
