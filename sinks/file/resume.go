package file

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/replay-tool/replay/internal/atomicfile"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// ResumeError is a file sink's refusal to resume (CheckResume): the replay
// group records Partition as replayed up to offset Committed, but its
// records before that offset are neither in this run's staging nor in the
// published output, so resuming would publish the remainder of the window
// only.
type ResumeError struct {
	// Partition, Committed, Start and End are the first partition missing
	// records: its committed offset and its range [Start, End).
	Partition             int32
	Committed, Start, End int64
	// Missing says what is missing or wrong, naming absolute paths.
	Missing string
	// More is how many other partitions miss records too.
	More int
	// Restore is the absolute path to restore: the staging directory, or
	// the published output.
	Restore string
}

// Error says what is missing and the ways out.
func (e *ResumeError) Error() string {
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" (and %d more partitions)", e.More)
	}
	return fmt.Sprintf("file sink: the replay group records partition %d as replayed up to offset %d (its range is [%d, %d)), but %s%s: "+
		"the output would lack the records before that offset. Run replay from the working directory of the first run (a relative "+
		"sink path is resolved against it) or restore %s; or replay the window again from its start",
		e.Partition, e.Committed, e.Start, e.End, e.Missing, more, e.Restore)
}

func resumeError(bad []sinks.ResumePoint, missing, restore string) error {
	p := bad[0]
	return &ResumeError{Partition: p.Partition, Committed: p.Committed, Start: p.Start, End: p.End,
		Missing: missing, More: len(bad) - 1, Restore: restore}
}

// CheckResume implements Resumer: the records of a partition replayed past
// its start must be in this run's staging or, once every partition is
// finished, in the published output. Else (staging deleted or replaced by
// another run, a relative Path resolved against another working
// directory) it returns a *ResumeError.
func (s *Sink) CheckResume(points []sinks.ResumePoint) error {
	var past []sinks.ResumePoint // replayed past their start
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
	s.stage.setFloor(durableFloor(points))
	dir := s.stagingDir()
	owner, err := os.ReadFile(filepath.Join(dir, runIDFile))
	switch {
	case err == nil && string(owner) == s.runID:
		err := s.checkStaging(past)
		s.resumed = err == nil && !finished
		return err
	case err == nil:
		return resumeError(past, fmt.Sprintf("the staging directory %s belongs to another run (identity %s, this run's is %s) writing to the same path, "+
			"which replaced this run's staging", absPath(dir), strings.TrimSpace(string(owner)), s.runID), absPath(dir))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("file sink: %w", err)
	}
	if _, err := os.Stat(dir); err == nil {
		return resumeError(past, fmt.Sprintf("the staging directory %s has no %s file naming its run", absPath(dir), runIDFile), absPath(dir))
	}
	if !finished {
		return resumeError(past, fmt.Sprintf("the staging directory %s does not exist", absPath(dir)), absPath(dir))
	}
	return s.checkPublished(past)
}

// durableFloor is the largest durable position the commits of points
// recorded: recovery may cut a damaged staging file past it, never below.
func durableFloor(points []sinks.ResumePoint) int64 {
	var floor int64
	for _, p := range points {
		if p.Committed > p.Start && p.Position == 0 {
			floor = math.MaxInt64 // no position recorded: all may be durable
		}
		floor = max(floor, p.Position)
	}
	return floor
}

// checkStaging checks that this run's staging holds the durable positions
// of past. Called with s.mu held.
func (s *Sink) checkStaging(past []sinks.ResumePoint) error {
	var bad []sinks.ResumePoint
	var missing string
	for _, p := range past {
		if s.stage.opened(p.Partition) != nil {
			continue // opened by this process
		}
		path := s.stage.file(p.Partition)
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
	return resumeError(bad, missing, absPath(s.stagingDir()))
}

// checkPublished checks that the published output holds the durable
// positions of past (a CSV output only that it exists). Called with s.mu
// held.
func (s *Sink) checkPublished(past []sinks.ResumePoint) error {
	// The least size of the one output file: the sum of the durable
	// positions (it concatenates the staging files), or with a sharedStager
	// (it is the staging file) the largest.
	var atLeast int64
	_, shared := s.stage.(*sharedStager)
	for _, p := range past {
		if shared {
			atLeast = max(atLeast, p.Position)
		} else {
			atLeast += p.Position
		}
	}
	var bad []sinks.ResumePoint
	var missing, restore string
	for _, p := range past {
		path, want := s.Path, atLeast
		if s.perPartition {
			path, want = s.partitionPath(p.Partition), p.Position
		}
		if !s.enc.verbatim() {
			want = 0 // rows converted at publish: sizes differ
		}
		var why string
		st, err := os.Stat(path)
		switch {
		case err != nil || !st.Mode().IsRegular():
			why = fmt.Sprintf("neither its published output %s nor the staging directory %s exists", absPath(path), absPath(s.stagingDir()))
		case st.Size() < want:
			why = fmt.Sprintf("its published output %s holds %d bytes, fewer than the %d bytes its staging held: it was truncated or replaced since", absPath(path), st.Size(), want)
		default:
			continue
		}
		bad = append(bad, p)
		if missing == "" {
			missing, restore = why, absPath(path)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return resumeError(bad, missing, restore)
}

// recoverPart cuts a partition's staging file after its last complete line
// and finds the offset after it.
func recoverPart(fp *filePart) error {
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

// scanLines reads the complete lines of a partition's staging file f: it
// returns the end of the last one and its offset (-1 when none), or with
// before >= 0 where the first line at or past offset before starts.
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
		res := gjson.GetBytes(line, "offset")
		off := res.Int()
		if !res.Exists() {
			return 0, -1, fmt.Errorf("line at byte %d has no offset: the staging file is not replay's", end)
		}
		if before >= 0 && off >= before {
			return end, lastOffset, nil
		}
		end += int64(len(line))
		lastOffset = off
	}
}

// openShared opens (creating it if need be) the staging file at path,
// recovering one that exists.
func openShared(path string, floor int64) (*sharedStage, error) {
	f, created, err := createStagingFile(path)
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

// recover cuts the staging file after its last complete line, reads the
// partitions' positions back and fsyncs what an earlier process left in
// the page cache, since a re-delivery of it is dropped and then committed.
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
// last line. A line that is not JSON ends the file there past floor (a
// power loss may lose unsynced writes before later ones), and is damage
// below it. A line without partition and offset, or offsets going back,
// is an error.
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
		if !encode.IsOneLineJSON(line[:len(line)-1]) {
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

// unshare gives the staging file at path an inode of its own when a
// published output (a crash before the staging was removed) links it too:
// writing the staging must not change the output.
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
	return atomicfile.Write(path, func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
}
