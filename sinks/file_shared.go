package sinks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/tidwall/gjson"
)

// sharedStage is the one staging file every partition of an interleaved
// file sink appends to (FileConfig.Interleave). Writes are serialized and
// each is complete lines of one partition, so the file is always complete
// lines up to size; a write that fails is cut off again.
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

// openShared opens (creating it if need be) the staging file at path and
// recovers it: a torn last line (a crash mid-write) is cut off, the
// partitions' positions are read back, and what an earlier process left in
// the page cache is fsynced, since a re-delivery of it is dropped and then
// committed.
func openShared(path string, floor int64) (*sharedStage, error) {
	if err := unshare(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	created := err == nil
	if created {
		// Its directory entry must be durable before a commit relies on it
		// (CheckResume takes a missing file for lost records).
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	} else if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, err
	}
	st := &sharedStage{f: f, next: map[int32]int64{}}
	if !created {
		if err := st.recover(floor); err != nil {
			f.Close()
			return nil, fmt.Errorf("recover: %w", err)
		}
	}
	return st, nil
}

func (st *sharedStage) recover(floor int64) error {
	end, next, err := scanShared(st.f, floor)
	if err != nil {
		return err
	}
	if err := st.f.Truncate(end); err != nil {
		return err
	}
	st.size, st.next = end, next
	if err := st.f.Sync(); err != nil {
		return err
	}
	st.syncedSize = end
	return nil
}

// scanShared reads the complete lines of an interleaved staging file: it
// returns the end of the last one and, per partition, the offset after its
// last line. A line that is not JSON ends the file there, as a torn last
// line does: after a power loss, a file system may keep later writes and
// lose (or zero) earlier ones that were never fsynced. That is only allowed
// past floor, the bytes durable at the last commit (CheckResume); below
// it, the file is damaged. A JSON line without partition and offset, or a
// partition's offsets going back, is an error: the file is not replay's.
func scanShared(f *os.File, floor int64) (end int64, next map[int32]int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, nil, err
	}
	next = map[int32]int64{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := readLine(r)
		if err == io.EOF {
			return end, next, nil // a torn line without '\n' is not counted
		}
		if err != nil {
			return 0, nil, err
		}
		if !isOneLineJSON(line[:len(line)-1]) {
			if end >= floor {
				return end, next, nil // torn past the durable data: cut here
			}
			return 0, nil, fmt.Errorf("line at byte %d is not a complete record, below the %d bytes that were durable at the last commit: the staging file is damaged", end, floor)
		}
		res := gjson.GetManyBytes(line, "partition", "offset")
		if res[0].Type != gjson.Number || res[1].Type != gjson.Number {
			return 0, nil, fmt.Errorf("line at byte %d has no partition and offset: the staging file is not replay's", end)
		}
		p, off := int32(res[0].Int()), res[1].Int()
		if prev, ok := next[p]; ok && off < prev {
			return 0, nil, fmt.Errorf("line at byte %d holds partition %d offset %d after offset %d: the staging file is not replay's", end, p, off, prev-1)
		}
		end += int64(len(line))
		next[p] = off + 1
	}
}

// sharedPiece is how much of a batch writeShared encodes before writing
// it: the encoding buffer of each partition stays this small whatever the
// batch size.
const sharedPiece = 128 << 10

// writeShared appends batch to the shared staging file, without the
// records it already holds (a re-delivery), in pieces of whole lines. A
// failure after some pieces leaves them written: the runner delivers the
// batch again and they are skipped. Called with fp.mu held.
func (s *File) writeShared(fp *filePart, batch []Record) error {
	st := s.shared
	p := batch[0].Partition
	st.mu.Lock()
	next, seen := st.next[p]
	broken := st.broken
	st.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("file sink: write partition %d: an earlier write failed and could not be undone: %w", p, broken)
	}
	if seen {
		batch = batch[sort.Search(len(batch), func(i int) bool { return batch[i].Offset >= next }):]
	}
	for len(batch) > 0 {
		fp.buf = fp.buf[:0]
		n := 0
		for n < len(batch) && len(fp.buf) < sharedPiece {
			fp.buf = AppendJSONL(fp.buf, &batch[n])
			n++
		}
		if err := st.append(fp.buf, p, batch[n-1].Offset+1); err != nil {
			return err
		}
		batch = batch[n:]
	}
	if cap(fp.buf) > 4<<20 {
		fp.buf = nil // do not pin a huge buffer after an outsized record
	}
	return nil
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

// publishShared publishes the shared staging file as Path: complete lines
// only, fsynced, then hard-linked under a temporary name and renamed over
// Path. The staging file left by an earlier process (a crash after the
// last commit) is recovered first. Without a staging file (nothing was
// written), Path is created empty. Called with s.mu held.
func (s *File) publishShared(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := s.shared
	if st == nil {
		if _, err := os.Stat(s.sharedPath()); errors.Is(err, os.ErrNotExist) {
			return writeFileSync(s.Path, nil)
		}
		var err error
		if st, err = openShared(s.sharedPath(), s.floor); err != nil {
			return err
		}
		s.shared = st
	}
	st.mu.Lock()
	size, broken := st.size, st.broken
	st.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("an earlier write failed and could not be undone: %w", broken)
	}
	if err := st.f.Truncate(size); err != nil {
		return err
	}
	if err := st.sync(); err != nil {
		return err
	}
	return s.linkOver(ctx, s.sharedPath(), s.Path, size)
}

// publishPart publishes partition p's JSONL staging file as its own output
// file (PerPartition): complete lines only, fsynced, linked over it.
// Called with s.mu held.
func (s *File) publishPart(ctx context.Context, p int32) error {
	path := s.partPath(p)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	end := int64(-1)
	if fp, ok := s.parts[p]; ok {
		end = fp.size // written (and recovered) by this process: complete lines
	} else if end, _, err = scanLines(f, -1); err != nil {
		return err
	}
	if err := f.Truncate(end); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return s.linkOver(ctx, path, s.partitionPath(p), end)
}

// linkOver makes dst a hard link to src atomically: a link under a
// temporary name in dst's directory, renamed over dst, and the directory
// fsynced. Where the file system has no hard links, it copies src's first
// size bytes instead (publish). src stays: a crash before the staging is
// removed publishes it again.
func (s *File) linkOver(ctx context.Context, src, dst string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return syncDir(filepath.Dir(dst)) // published before a crash: renaming a link over itself would leave the link
		}
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-link")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Link(src, tmp); err != nil {
		if !linksUnsupported(err) {
			return err
		}
		return s.copyOver(ctx, src, dst, size)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// copyOver publishes src's first size bytes as dst (writeAtomic).
func (s *File) copyOver(ctx context.Context, src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomic(dst, func(f *os.File) error {
		if _, err := io.Copy(f, io.LimitReader(in, size)); err != nil {
			return err
		}
		return ctx.Err()
	})
}

// unshare gives the staging file at path an inode of its own when other
// links share it: after a crash between publishing (a hard link to the
// staging file) and removing the staging, the published output is that
// same file, and writing to the staging (a rewind truncates it) would
// change the published output in place. A missing file is fine.
func unshare(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || linkCount(fi) <= 1 {
		return err
	}
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomic(path, func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
}

// linksUnsupported reports whether err, from os.Link, says the file system
// (FAT, some network and FUSE file systems) cannot hard-link the file.
func linksUnsupported(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.EXDEV, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP, syscall.ENOSYS} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
