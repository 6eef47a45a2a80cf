package sinks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
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

	"github.com/replay-tool/replay/plan"
)

// File writes newline-delimited JSON (see AppendJSONL), or CSV with the
// configured columns, to one file or one file per partition, atomically and
// deterministically.
//
// While a run is in progress, each partition's records go to its own staging
// file in the directory Path+".parts", appended by Write and fsynced by Sync.
// A re-delivered record (offset below what the staging file already holds)
// truncates the staging file back to that offset first, so a resume never
// duplicates. Finish concatenates the staging files in partition order into
// a temporary file, fsyncs it and renames it over Path: readers of Path see
// either the previous file or the complete new one, and the same window
// always produces byte-identical output.
//
// A CSV file starts with a header row of the column names; fields are
// quoted as RFC 4180 says (encoding/csv), lines end in LF, and NULL (a
// missing header or path, a tombstone's value) is an empty field. Its
// staging lines are JSON too, each holding the record's offset and its CSV
// row, so that a re-delivery truncates them as it does JSONL. With
// PerPartition, Path holds {partition} and Finish publishes each
// partition's staging file as its own file, each atomically.
type File struct {
	Path  string
	runID string
	// csv holds the columns of a CSV file; nil for JSONL.
	csv          []column
	keyed        bool // a CSV column holds the idempotency key
	keyer        *Keyer
	perPartition bool

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
}

// NewFileSink returns the file sink cfg describes.
func NewFileSink(cfg FileConfig) (*File, error) {
	if cfg.Path == "" {
		return nil, errors.New("file sink: empty path")
	}
	s := &File{Path: cfg.Path, runID: cfg.RunID, keyer: cfg.Keyer, perPartition: cfg.PerPartition, parts: map[int32]*filePart{}}
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
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	return s, nil
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
			if err := s.publish(ctx, s.partitionPath(p), []int32{p}); err != nil {
				return fmt.Errorf("file sink: publish %s: %w", s.partitionPath(p), err)
			}
		}
	} else if err := s.publish(ctx, s.Path, parts); err != nil {
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
	w := bufio.NewWriterSize(tmp, 1<<20)
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
	if err := w.Flush(); err != nil {
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
		line, err := r.ReadBytes('\n')
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
