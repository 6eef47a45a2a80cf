package sinks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/plan"
)

// File writes newline-delimited JSON (see AppendJSONL), or CSV with the
// configured columns, to one file or one file per partition, atomically and
// deterministically.
//
// While a run is in progress, records are staged in the directory
// Path+".parts", appended by Write and fsynced by Sync, in one of two layouts:
//
//   - Interleave (one JSONL file, the default of a plan): every partition
//     appends to one staging file, records.jsonl, so its lines interleave
//     partitions (each partition's in offset order). A re-delivered record
//     (offset below what the staging file holds for its partition) is
//     dropped: the file already holds the same line. Finish fsyncs the file
//     and publishes it by a hard link renamed over Path: the output is
//     written to disk once. The same window always produces the same lines,
//     in an order that depends on timing.
//   - Otherwise each partition has its own staging file, partition-N.jsonl.
//     A re-delivered record truncates it back to that offset first. Finish
//     concatenates the staging files in partition order into a temporary
//     file, fsyncs it and renames it over Path (with PerPartition, it links
//     each JSONL staging file to its own output instead of copying it), so
//     the same window always produces byte-identical output.
//
// Either way, readers of Path see either the previous file or the complete
// new one, and a resume never duplicates a record.
//
// A CSV file starts with a header row of the column names; fields are
// quoted as RFC 4180 says (encoding/csv), lines end in LF, and NULL (a
// missing header or path, a tombstone's value) is an empty field. Its
// staging lines are JSON too, each holding the record's offset and its CSV
// row, so that a re-delivery truncates them as it does JSONL. With
// PerPartition, Path holds {partition} and Finish publishes each
// partition's staging file as its own file, each atomically.
//
// One process at a time writes an output: NewFileSink takes an exclusive
// lock on a hidden file next to Path, .NAME.lock (flock, released by Close
// or when the process dies), and fails at once when another process holds
// it. A resumed run checks that the staging of the earlier process is
// still there (CheckResume): Sync creates a partition's staging file,
// empty if need be, before the runner commits past the partition's start.
type File struct {
	Path  string
	runID string
	// csv holds the columns of a CSV file; nil for JSONL.
	csv          []column
	keyed        bool // a CSV column holds the idempotency key
	keyer        *Keyer
	perPartition bool
	interleave   bool

	// lock keeps other processes off this output (and its staging) until
	// Close.
	lock *outputLock

	mu    sync.Mutex
	parts map[int32]*filePart
	// shared is the staging file of every partition with interleave, once
	// opened by this process.
	shared *sharedStage
	// floor is, with interleave, the largest durable position the group's
	// commits recorded (CheckResume): recovery may cut a damaged staging
	// file past it, never below.
	floor int64
}

var (
	_ Sink       = (*File)(nil)
	_ Syncer     = (*File)(nil)
	_ Resumer    = (*File)(nil)
	_ Positioner = (*File)(nil)
)

// Capabilities declares that a file sink batches durability (Sync), can
// say what is durable (SyncedPosition) and checks its staging on a resume.
func (s *File) Capabilities() Capabilities {
	return Capabilities{Syncer: s, Resumer: s, Positioner: s}
}

// filePart is one partition's staging: its own file, or with interleave
// only its encoding buffer (f is nil).
type filePart struct {
	mu   sync.Mutex
	f    *os.File
	next int64 // offset after the last record in the staging file
	size int64
	// synced is size at the last successful Sync: durable. syncErr is
	// sticky: after a failed fsync the kernel may have dropped the pages,
	// and the next fsync would report success.
	synced  int64
	syncErr error
	buf     []byte
	// row and rowW encode one CSV row.
	row  bytes.Buffer
	rowW *csv.Writer
}

// runIDFile names the staging directory's owner: a staging directory left by
// a run with another identity (another plan, or a restarted resolution) is
// discarded instead of being mixed into this run's output.
const runIDFile = "RUN"

// NewFile returns a file sink writing JSONL to path. runID identifies the
// resolved run (plan fingerprint and ranges); staging left by a different
// run is removed.
func NewFile(path, runID string) (*File, error) {
	return NewFileSink(FileConfig{Path: path, RunID: runID})
}

// FileConfig configures a file sink.
type FileConfig struct {
	// Path is the output file; with PerPartition, a pattern holding
	// {partition} (plan.PartitionPlaceholder).
	Path string
	// RunID identifies the resolved run: staging left by another is removed.
	RunID string
	// Format is "jsonl" (default) or "csv".
	Format string
	// Columns are the CSV columns (required for csv).
	Columns plan.Columns
	// PerPartition writes one file per partition.
	PerPartition bool
	// Keyer computes a CSV column holding the idempotency key; nil means
	// DefaultKey.
	Keyer *Keyer
	// Interleave stages every partition of a single JSONL file in one file
	// and publishes it without copying it (see File). It does not apply to
	// CSV or PerPartition, whose staging is per partition.
	Interleave bool
}

// NewFileSink returns the file sink cfg describes.
func NewFileSink(cfg FileConfig) (*File, error) {
	if cfg.Path == "" {
		return nil, errors.New("file sink: empty path")
	}
	s := &File{Path: cfg.Path, runID: cfg.RunID, keyer: cfg.Keyer, perPartition: cfg.PerPartition, parts: map[int32]*filePart{},
		interleave: cfg.Interleave && !cfg.PerPartition && cfg.Format != "csv"}
	if cfg.PerPartition != strings.Contains(cfg.Path, plan.PartitionPlaceholder) {
		return nil, fmt.Errorf("file sink: path %q: one file per partition needs %s in the path, and only it", cfg.Path, plan.PartitionPlaceholder)
	}
	switch cfg.Format {
	case "", "jsonl":
		if len(cfg.Columns) > 0 {
			return nil, errors.New("file sink: columns apply to the csv format only")
		}
	case "csv":
		cols, err := parseColumns(cfg.Columns, nil, false)
		if err != nil {
			return nil, fmt.Errorf("file sink: %w", err)
		}
		if len(cols) == 0 {
			return nil, errors.New("file sink: a csv file needs columns")
		}
		s.csv, s.keyed = cols, usesKey(cols)
	default:
		return nil, fmt.Errorf("file sink: format %q: want jsonl or csv", cfg.Format)
	}
	if err := checkOutputPath(cfg.Path, cfg.PerPartition); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("file sink: path %s: %s is not a directory (a file is in the way): fix the path", cfg.Path, firstNonDir(filepath.Dir(cfg.Path)))
		}
		return nil, fmt.Errorf("file sink: %w", err)
	}
	lock, err := lockOutput(s.lockPath())
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("file sink: another replay process is writing %s (lock %s held%s); wait for it or stop it", absPath(cfg.Path), absPath(s.lockPath()), lockHolder(s.lockPath()))
	}
	if err != nil {
		return nil, fmt.Errorf("file sink: lock %s: %w", s.lockPath(), err)
	}
	s.lock = lock
	return s, nil
}

// lockPath is the lock file that keeps a second process off the output: a
// hidden file next to it (not in the staging directory, which a run of
// another identity removes), there while a process writes the output.
func (s *File) lockPath() string {
	return filepath.Join(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".lock")
}

// lockHolder names the process holding the lock at path, as its lock file
// records it ("" when unknown).
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return " by process " + pid
	}
	return ""
}

// absPath is path made absolute for messages (path itself if it cannot be).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// checkOutputPath refuses an output path that cannot be published, before
// the run starts (it failed at publish, after the whole window had been
// replayed and committed): a path naming a directory, a directory in the
// way of a partition's file of a per_partition pattern, a file in the way
// of its directories.
func checkOutputPath(path string, perPartition bool) error {
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)) {
		return fmt.Errorf("file sink: path %q ends in %q: it names a directory; give the file to write, e.g. %s", path, string(path[len(path)-1]), filepath.Join(path, "out.jsonl"))
	}
	if !perPartition {
		st, err := os.Stat(path)
		switch {
		case err != nil:
			return nil // missing (or unreadable: MkdirAll or publish says why)
		case st.IsDir():
			return fmt.Errorf("file sink: path %s is a directory: give the file to write, e.g. %s", absPath(path), filepath.Join(path, "out.jsonl"))
		case !st.Mode().IsRegular():
			return fmt.Errorf("file sink: path %s is not a regular file (%v): publishing renames a new file over it; give a file path", absPath(path), st.Mode().Type())
		}
		return nil
	}
	// Each level of the pattern holding the placeholder: what exists there
	// for some partition must be a directory, except the last level, which
	// must not be.
	elems := strings.Split(filepath.ToSlash(path), "/")
	for i, el := range elems {
		if !strings.Contains(el, plan.PartitionPlaceholder) {
			continue
		}
		prefix := strings.Join(elems[:i+1], "/")
		literal := strings.Split(prefix, plan.PartitionPlaceholder)
		quoted := make([]string, len(literal))
		for j, l := range literal {
			quoted[j] = regexp.QuoteMeta(l)
			literal[j] = globEscape(l)
		}
		re := regexp.MustCompile("^" + strings.Join(quoted, "[0-9]+") + "$")
		matches, _ := filepath.Glob(filepath.FromSlash(strings.Join(literal, "*")))
		last := i == len(elems)-1
		for _, m := range matches {
			if !re.MatchString(filepath.ToSlash(m)) {
				continue
			}
			st, err := os.Stat(m)
			switch {
			case err != nil:
			case last && st.IsDir():
				return fmt.Errorf("file sink: path %q: %s, a partition's output file, is a directory: remove it or change the path", path, absPath(m))
			case !last && !st.IsDir():
				return fmt.Errorf("file sink: path %q: %s is not a directory (a file is in the way of a partition's output): remove it or change the path", path, absPath(m))
			}
		}
	}
	return nil
}

// globEscape quotes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(s)
}

// firstNonDir returns the deepest existing element of dir when it is not a
// directory: what is in the way of MkdirAll (else dir, absolute).
func firstNonDir(dir string) string {
	abs := absPath(dir)
	for p := abs; ; {
		if st, err := os.Stat(p); err == nil {
			if !st.IsDir() {
				return p
			}
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	return abs
}

func (s *File) stagingDir() string { return s.Path + ".parts" }

func (s *File) partPath(p int32) string {
	return filepath.Join(s.stagingDir(), fmt.Sprintf("partition-%d.jsonl", p))
}

// sharedPath is the staging file of every partition with interleave.
func (s *File) sharedPath() string { return filepath.Join(s.stagingDir(), "records.jsonl") }

// stagingFile is the file that stages partition p.
func (s *File) stagingFile(p int32) string {
	if s.interleave {
		return s.sharedPath()
	}
	return s.partPath(p)
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
	if err := syncDir(filepath.Dir(dir)); err != nil { // the staging directory's entry
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
	if s.interleave {
		if s.shared == nil {
			st, err := openShared(s.sharedPath(), s.floor)
			if err != nil {
				return nil, fmt.Errorf("file sink: %s: %w", s.sharedPath(), err)
			}
			s.shared = st
		}
		fp := &filePart{next: -1}
		s.parts[p] = fp
		return fp, nil
	}
	f, err := os.OpenFile(s.partPath(p), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		// A new staging file: its directory entry must be durable before a
		// commit relies on it (CheckResume takes a missing file for lost
		// records).
		if err := syncDir(s.stagingDir()); err != nil {
			f.Close()
			return nil, fmt.Errorf("file sink: %w", err)
		}
	} else if errors.Is(err, os.ErrExist) {
		if err = unshare(s.partPath(p)); err == nil {
			f, err = os.OpenFile(s.partPath(p), os.O_RDWR, 0)
		}
	}
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

// readLine reads the next line, '\n' included (io.EOF after a last line
// without one). The line stays valid until the next call only when it fits
// r's buffer; a longer one is copied: the next ReadSlice overwrites the
// buffer a line points into (lines over 1 MiB, e.g. a binary value escaped
// 6x, read a wrong offset or failed the rewind).
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = r.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
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
		line, err := readLine(r)
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
	if s.interleave {
		return s.writeShared(fp, batch)
	}
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
	if err := s.encode(fp, batch); err != nil {
		return err
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

// encode puts batch's staging lines in fp.buf: JSONL, or for a CSV file
// {"offset":N,"csv":"<row>"}. A key template failing on a record returns
// its *RecordError, and nothing of the batch is written.
func (s *File) encode(fp *filePart, batch []Record) error {
	fp.buf = fp.buf[:0]
	if s.csv == nil {
		for i := range batch {
			fp.buf = AppendJSONL(fp.buf, &batch[i])
		}
		return nil
	}
	if fp.rowW == nil {
		fp.rowW = csv.NewWriter(&fp.row)
	}
	fields := make([]string, len(s.csv))
	for i := range batch {
		r := &batch[i]
		cs := cells{r: r}
		if s.keyed {
			key, err := s.keyer.Key(r)
			if err != nil {
				return err
			}
			cs.key = key
		}
		for c, col := range s.csv {
			fields[c], _ = cs.text(col) // NULL is an empty field
		}
		fp.row.Reset()
		if err := writeCSVRow(fp.rowW, fields); err != nil {
			return fmt.Errorf("file sink: partition %d offset %d: %w", r.Partition, r.Offset, err)
		}
		fp.buf = append(fp.buf, `{"offset":`...)
		fp.buf = strconv.AppendInt(fp.buf, r.Offset, 10)
		fp.buf = append(fp.buf, `,"csv":`...)
		fp.buf = appendJSONBytes(fp.buf, fp.row.Bytes())
		fp.buf = append(fp.buf, "}\n"...)
	}
	return nil
}

func writeCSVRow(w *csv.Writer, fields []string) error {
	if err := w.Write(fields); err != nil {
		return err
	}
	w.Flush()
	return w.Error()
}

// csvHeader is the header row of a CSV file.
func (s *File) csvHeader() []byte {
	var b bytes.Buffer
	names := make([]string, len(s.csv))
	for i, c := range s.csv {
		names[i] = c.name
	}
	_ = writeCSVRow(csv.NewWriter(&b), names) // a bytes.Buffer does not fail
	return b.Bytes()
}

// Sync fsyncs the partition's staging file: everything Write appended to it
// is then on stable storage. It creates the staging file (empty) when this
// process wrote nothing to the partition, so that every partition committed
// past its start has one, also when all its records were filtered out:
// CheckResume then tells lost staging from a partition without records.
func (s *File) Sync(ctx context.Context, partition int32) error {
	fp, err := s.part(partition)
	if err != nil {
		return err
	}
	if s.interleave {
		if err := s.shared.sync(); err != nil {
			return fmt.Errorf("file sink: fsync partition %d: %w", partition, err)
		}
		return nil
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.syncErr != nil {
		return fp.syncErr
	}
	if err := fp.f.Sync(); err != nil {
		fp.syncErr = fmt.Errorf("file sink: fsync partition %d: %w", partition, err)
		return fp.syncErr
	}
	fp.synced = fp.size
	return nil
}

// SyncedPosition implements Positioner: the size in bytes of the staging
// file holding partition's records at its last successful Sync (with
// interleave, the one staging file of all partitions). 0 before any.
func (s *File) SyncedPosition(partition int32) int64 {
	s.mu.Lock()
	fp, ok := s.parts[partition]
	shared := s.shared
	s.mu.Unlock()
	switch {
	case shared != nil:
		shared.syncMu.Lock()
		defer shared.syncMu.Unlock()
		return shared.syncedSize
	case ok:
		fp.mu.Lock()
		defer fp.mu.Unlock()
		return fp.synced
	}
	return 0
}

// Finish publishes the staged output: partition files concatenated in
// partition order into Path (after the header row of a CSV file), or with
// PerPartition each partition's into its own file, atomically. With no
// staging left (a finished run), it leaves the output alone, creating Path
// empty (a CSV file with its header row) if it does not exist. Staging of
// another run is discarded, never published.
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
		if _, err := os.Stat(s.Path); errors.Is(err, os.ErrNotExist) && !s.perPartition {
			return writeFileSync(s.Path, s.header())
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if s.interleave {
		if err := s.publishShared(ctx); err != nil {
			return fmt.Errorf("file sink: publish %s: %w", s.Path, err)
		}
		return s.dropStaging()
	}
	var parts []int32
	for _, e := range entries {
		n := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "partition-"), ".jsonl")
		if p, err := strconv.ParseInt(n, 10, 32); err == nil && n != e.Name() {
			parts = append(parts, int32(p))
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	if s.perPartition {
		for _, p := range parts {
			if s.csv == nil {
				if err := s.publishPart(ctx, p); err != nil {
					return fmt.Errorf("file sink: publish %s: %w", s.partitionPath(p), err)
				}
				continue
			}
			if err := s.publish(ctx, s.partitionPath(p), []int32{p}); err != nil {
				return fmt.Errorf("file sink: publish %s: %w", s.partitionPath(p), err)
			}
		}
	} else if err := s.publish(ctx, s.Path, parts); err != nil {
		return fmt.Errorf("file sink: publish %s: %w", s.Path, err)
	}
	return s.dropStaging()
}

// dropStaging removes the published staging directory. Called with s.mu
// held.
func (s *File) dropStaging() error {
	s.closeParts()
	// Rename, then remove: os.RemoveAll is not atomic, and a crash halfway
	// through it left a staging directory missing some partitions, which
	// the next Finish published as the whole output.
	if err := os.Rename(s.stagingDir(), s.doneDir()); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	// Durable before the removal: a power loss must not bring back a
	// staging directory whose files are the published outputs.
	if err := syncDir(filepath.Dir(s.stagingDir())); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return os.RemoveAll(s.doneDir())
}

// doneDir is where Finish moves the published staging directory to delete it.
func (s *File) doneDir() string { return s.Path + ".parts-done" }

// partitionPath is the output file of partition p with PerPartition.
func (s *File) partitionPath(p int32) string {
	return strings.ReplaceAll(s.Path, plan.PartitionPlaceholder, strconv.Itoa(int(p)))
}

// header is what an output file starts with: the header row of a CSV file.
func (s *File) header() []byte {
	if s.csv == nil {
		return nil
	}
	return s.csvHeader()
}

// publish writes the staged lines of parts, in order, to path: a
// temporary file, fsynced and renamed over path.
func (s *File) publish(ctx context.Context, path string, parts []int32) error {
	return writeAtomic(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.Write(s.header()); err != nil {
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
			if err := s.appendCompleteLines(w, s.partPath(p), end); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}

// writeAtomic makes path the file that fill writes: a temporary file in
// path's directory (mode 0644), fsynced and renamed over path, and the
// directory fsynced. Readers of path see the old file or the whole new one.
func writeAtomic(path string, fill func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	defer tmp.Close()
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		return err
	}
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// appendCompleteLines copies the complete lines of the staging file at src
// to dst: its first end bytes, or, with end < 0, what scanLines finds. A
// CSV file gets the row of each line.
func (s *File) appendCompleteLines(dst io.Writer, src string, end int64) error {
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
	if s.csv == nil {
		_, err = io.Copy(dst, io.LimitReader(f, end))
		return err
	}
	r := bufio.NewReaderSize(io.LimitReader(f, end), 1<<20)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			row := gjson.GetBytes(line, "csv")
			if row.Type != gjson.String {
				return fmt.Errorf("staging line without its csv row: the staging file is not replay's")
			}
			if _, err := io.WriteString(dst, row.Str); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Close closes the staging files and releases the output's lock; staged
// output stays for a resume.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.closeParts()
	lock := s.lock
	s.lock = nil
	return errors.Join(err, lock.unlock())
}

// CheckResume implements Resumer. The records of a partition replayed past
// its start must be in this run's staging (the partition's staging file
// exists, in a staging directory of this run's identity) or, once every
// partition is finished and Finish removed the staging, in the published
// output (Path, or each partition's file with PerPartition). Anything else
// means the staging was deleted or replaced by a run of another plan
// writing to the same path, or this process resolves a relative Path
// against another working directory than the first run did: resuming would
// publish the remainder of the window only.
func (s *File) CheckResume(points []ResumePoint) error {
	var past []ResumePoint // replayed past their start
	finished := true
	for _, p := range points {
		if p.Committed > p.Start {
			past = append(past, p)
		}
		finished = finished && p.Committed >= p.End
	}
	if len(past) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range points {
		if p.Committed > p.Start && p.Position == 0 {
			// Committed by a version that recorded no position: all of
			// the staging file may be durable; recovery cuts nothing.
			s.floor = math.MaxInt64
		}
		s.floor = max(s.floor, p.Position)
	}
	dir := s.stagingDir()
	var missing, restore string
	var bad []ResumePoint
	owner, err := os.ReadFile(filepath.Join(dir, runIDFile))
	switch {
	case err == nil && string(owner) == s.runID:
		for _, p := range past {
			if _, ok := s.parts[p.Partition]; ok {
				continue // opened by this process
			}
			path := s.stagingFile(p.Partition)
			var why string
			st, err := os.Stat(path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				why = fmt.Sprintf("its staging file %s is missing", absPath(path))
			case err != nil:
				return fmt.Errorf("file sink: %w", err)
			case st.Size() < p.Position:
				why = fmt.Sprintf("its staging file %s holds %d bytes, and %d bytes of it were durable at that commit: it was truncated or emptied since",
					absPath(path), st.Size(), p.Position)
			default:
				continue
			}
			if len(bad) == 0 {
				missing = why
			}
			bad = append(bad, p)
		}
		if len(bad) == 0 {
			return nil
		}
		restore = absPath(dir)
	case err == nil:
		missing = fmt.Sprintf("the staging directory %s belongs to another run (identity %s, this run's is %s) writing to the same path, "+
			"which replaced this run's staging", absPath(dir), strings.TrimSpace(string(owner)), s.runID)
		restore = absPath(dir)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("file sink: %w", err)
	default:
		if _, err := os.Stat(dir); err == nil {
			missing = fmt.Sprintf("the staging directory %s has no %s file naming its run", absPath(dir), runIDFile)
			restore = absPath(dir)
			break
		}
		if !finished {
			missing = fmt.Sprintf("the staging directory %s does not exist", absPath(dir))
			restore = absPath(dir)
			break
		}
		// Finished: Finish published the output and removed the staging,
		// which is what a re-run of a finished plan finds.
		// A JSONL output holds its staging files as they were: at least
		// the durable positions (their sum for one file of partition-ordered
		// parts; with interleave, each is a position in that one file).
		var atLeast int64
		for _, p := range past {
			if s.interleave {
				atLeast = max(atLeast, p.Position)
			} else {
				atLeast += p.Position
			}
		}
		for _, p := range past {
			out, want := s.Path, atLeast
			if s.perPartition {
				out, want = s.partitionPath(p.Partition), p.Position
			}
			if s.csv != nil {
				want = 0 // rows converted at publish: sizes differ
			}
			var why string
			st, err := os.Stat(out)
			switch {
			case err != nil || !st.Mode().IsRegular():
				why = fmt.Sprintf("neither its published output %s nor the staging directory %s exists", absPath(out), absPath(dir))
			case st.Size() < want:
				why = fmt.Sprintf("its published output %s holds %d bytes, fewer than the %d bytes its staging held: it was truncated or replaced since", absPath(out), st.Size(), want)
			default:
				continue
			}
			bad = append(bad, p)
			if missing == "" {
				missing, restore = why, absPath(out)
			}
		}
		if len(bad) == 0 {
			return nil
		}
	}
	if len(bad) == 0 {
		bad = past
	}
	more := ""
	if len(bad) > 1 {
		more = fmt.Sprintf(" (and %d more partitions)", len(bad)-1)
	}
	p := bad[0]
	return fmt.Errorf("file sink: the replay group records partition %d as replayed up to offset %d (its range is [%d, %d)), but %s%s: "+
		"the output would lack the records before that offset. Run replay from the working directory of the first run (a relative "+
		"sink path is resolved against it) or restore %s; or replay the window again from its start with 'replay run PLAN --restart'",
		p.Partition, p.Committed, p.Start, p.End, missing, more, restore)
}

func (s *File) closeParts() error {
	var errs []error
	for p, fp := range s.parts {
		if fp.f != nil {
			errs = append(errs, fp.f.Close())
		}
		delete(s.parts, p)
	}
	if s.shared != nil {
		errs = append(errs, s.shared.f.Close())
		s.shared = nil
	}
	return errors.Join(errs...)
}

// writeFileSync makes data the contents of path, durably and atomically.
func writeFileSync(path string, data []byte) error {
	return writeAtomic(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
