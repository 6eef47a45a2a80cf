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
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// File writes newline-delimited JSON (see AppendJSONL) to one file,
// atomically and deterministically.
//
// While a run is in progress, each partition's records go to its own staging
// file in the directory Path+".parts", appended by Write and fsynced by Sync.
// A re-delivered record (offset below what the staging file already holds)
// truncates the staging file back to that offset first, so a resume never
// duplicates. Finish concatenates the staging files in partition order into
// a temporary file, fsyncs it and renames it over Path: readers of Path see
// either the previous file or the complete new one, and the same window
// always produces byte-identical output.
type File struct {
	Path  string
	runID string

	mu    sync.Mutex
	parts map[int32]*filePart
}

var (
	_ Sink   = (*File)(nil)
	_ Syncer = (*File)(nil)
)

type filePart struct {
	mu   sync.Mutex
	f    *os.File
	next int64 // offset after the last record in the staging file
	size int64
	buf  []byte
}

// runIDFile names the staging directory's owner: a staging directory left by
// a run with another identity (another plan, or a restarted resolution) is
// discarded instead of being mixed into this run's output.
const runIDFile = "RUN"

// NewFile returns a file sink writing to path. runID identifies the resolved
// run (plan fingerprint and ranges); staging left by a different run is removed.
func NewFile(path, runID string) (*File, error) {
	if path == "" {
		return nil, errors.New("file sink: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return &File{Path: path, runID: runID, parts: map[int32]*filePart{}}, nil
}

func (s *File) stagingDir() string { return s.Path + ".parts" }

func (s *File) partPath(p int32) string {
	return filepath.Join(s.stagingDir(), fmt.Sprintf("partition-%d.jsonl", p))
}

// prepareStaging creates the staging directory, discarding one that belongs
// to another run. Called with s.mu held.
func (s *File) prepareStaging() error {
	dir := s.stagingDir()
	owner, err := os.ReadFile(filepath.Join(dir, runIDFile))
	switch {
	case err == nil && string(owner) == s.runID:
		return nil
	case err == nil || !errors.Is(err, os.ErrNotExist):
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	default:
		if _, statErr := os.Stat(dir); statErr == nil {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeFileSync(filepath.Join(dir, runIDFile), []byte(s.runID))
}

func (s *File) part(p int32) (*filePart, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fp, ok := s.parts[p]; ok {
		return fp, nil
	}
	if len(s.parts) == 0 {
		if err := s.prepareStaging(); err != nil {
			return nil, fmt.Errorf("file sink: staging directory: %w", err)
		}
	}
	f, err := os.OpenFile(s.partPath(p), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	fp := &filePart{f: f, next: -1}
	if err := fp.recover(); err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: recover %s: %w", s.partPath(p), err)
	}
	s.parts[p] = fp
	return fp, nil
}

// recover drops a torn last line (a crash mid-write) and finds the offset
// after the last complete record.
func (fp *filePart) recover() error {
	end, last, err := scanLines(fp.f, -1)
	if err != nil {
		return err
	}
	if err := fp.f.Truncate(end); err != nil {
		return err
	}
	fp.size = end
	if last >= 0 {
		fp.next = last + 1
	}
	return nil
}

// scanLines reads complete lines from the start of f. With before < 0 it
// returns the end of the last complete line and that line's offset (-1 when
// none). With before >= 0 it stops at the first line whose offset is >=
// before and returns where that line starts.
func scanLines(f *os.File, before int64) (end, lastOffset int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, -1, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	lastOffset = -1
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Copy before reading on: the next ReadSlice overwrites the
			// buffer that line points into (lines over 1 MiB, e.g. a binary
			// value escaped 6x, read a wrong offset or failed the rewind).
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			return end, lastOffset, nil // a torn line without '\n' is not counted
		}
		if err != nil {
			return 0, -1, err
		}
		off := gjson.GetBytes(line, "offset")
		if !off.Exists() {
			return 0, -1, fmt.Errorf("line at byte %d has no offset: the staging file is not replay's", end)
		}
		if before >= 0 && off.Int() >= before {
			return end, lastOffset, nil
		}
		end += int64(len(line))
		lastOffset = off.Int()
	}
}

// Write appends batch to its partition's staging file. The records are
// durable once Sync for the partition returns (File is a Syncer).
func (s *File) Write(ctx context.Context, batch []Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fp, err := s.part(batch[0].Partition)
	if err != nil {
		return err
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.next > batch[0].Offset { // re-delivery: drop what will be written again
		end, last, err := scanLines(fp.f, batch[0].Offset)
		if err != nil {
			return fmt.Errorf("file sink: rewind partition %d: %w", batch[0].Partition, err)
		}
		if err := fp.f.Truncate(end); err != nil {
			return fmt.Errorf("file sink: rewind partition %d: %w", batch[0].Partition, err)
		}
		fp.size, fp.next = end, last+1
	}
	fp.buf = fp.buf[:0]
	for i := range batch {
		fp.buf = AppendJSONL(fp.buf, &batch[i])
	}
	if _, err := fp.f.WriteAt(fp.buf, fp.size); err != nil {
		return fmt.Errorf("file sink: write partition %d: %w", batch[0].Partition, err)
	}
	fp.size += int64(len(fp.buf))
	fp.next = batch[len(batch)-1].Offset + 1
	if cap(fp.buf) > 4<<20 {
		fp.buf = nil // do not pin a huge buffer after an outsized batch
	}
	return nil
}

// Sync fsyncs the partition's staging file: everything Write appended to it
// is then on stable storage.
func (s *File) Sync(ctx context.Context, partition int32) error {
	s.mu.Lock()
	fp, ok := s.parts[partition]
	s.mu.Unlock()
	if !ok {
		return nil // nothing written by this process
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if err := fp.f.Sync(); err != nil {
		return fmt.Errorf("file sink: fsync partition %d: %w", partition, err)
	}
	return nil
}

// Finish publishes the staged output: partition files concatenated in
// partition order into Path, atomically. With no staging left (a finished
// run), it leaves Path alone, creating it empty if it does not exist.
// Staging of another run is discarded, never published.
func (s *File) Finish(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.stagingDir()
	if err := os.RemoveAll(s.doneDir()); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if len(s.parts) == 0 {
		// Nothing written by this process: staging left by another run must
		// not be published as this run's output (it was, when this run's
		// window was empty). prepareStaging discards it; this run's own
		// staging (a resume after a crash) is kept.
		if _, err := os.Stat(dir); err == nil {
			if err := s.prepareStaging(); err != nil {
				return fmt.Errorf("file sink: staging directory: %w", err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(s.Path); errors.Is(err, os.ErrNotExist) {
			return writeFileSync(s.Path, nil)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	var parts []int32
	for _, e := range entries {
		n := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "partition-"), ".jsonl")
		if p, err := strconv.ParseInt(n, 10, 32); err == nil && n != e.Name() {
			parts = append(parts, int32(p))
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	if err := s.publish(ctx, parts); err != nil {
		return fmt.Errorf("file sink: publish %s: %w", s.Path, err)
	}
	s.closeParts()
	// Rename, then remove: os.RemoveAll is not atomic, and a crash halfway
	// through it left a staging directory missing some partitions, which
	// the next Finish published as the whole output.
	if err := os.Rename(dir, s.doneDir()); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return os.RemoveAll(s.doneDir())
}

// doneDir is where Finish moves the published staging directory to delete it.
func (s *File) doneDir() string { return s.Path + ".parts-done" }

func (s *File) publish(ctx context.Context, parts []int32) error {
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	defer tmp.Close()
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return err
	}
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := int64(-1) // unknown: staging of an earlier process, scanned
		if fp, ok := s.parts[p]; ok {
			end = fp.size // written (and recovered) by this process: complete lines
		}
		if err := appendCompleteLines(tmp, s.partPath(p), end); err != nil {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(s.Path))
}

// appendCompleteLines copies the complete lines of the file at src to dst:
// its first end bytes, or, with end < 0, what scanLines finds.
func appendCompleteLines(dst io.Writer, src string, end int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if end < 0 {
		if end, _, err = scanLines(f, -1); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	_, err = io.Copy(dst, io.LimitReader(f, end))
	return err
}

// Close closes the staging files; staged output stays for a resume.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeParts()
}

func (s *File) closeParts() error {
	var errs []error
	for p, fp := range s.parts {
		errs = append(errs, fp.f.Close())
		delete(s.parts, p)
	}
	return errors.Join(errs...)
}

func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
