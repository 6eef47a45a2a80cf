package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/replay-tool/replay/internal/atomicfile"
	"github.com/replay-tool/replay/internal/record"
)

// stager keeps a file sink's staging until Finish publishes it: partStager
// (a staging file per partition) or sharedStager (one staging file).
//
// write is called with the partition's filePart.mu held, sync and synced
// with no lock (synced takes Sink.mu itself), the others with Sink.mu held.
type stager interface {
	// opened returns partition p's staging when this process opened it.
	opened(p int32) *filePart
	// active reports whether this process opened any staging.
	active() bool
	// open opens partition p's staging in the existing staging directory,
	// recovering what an earlier process left there.
	open(p int32) (*filePart, error)
	// file is the staging file that holds partition p's records.
	file(p int32) string
	// write appends batch, records of fp's partition in offset order, to
	// the staging, minus or in place of the records of a re-delivery.
	write(fp *filePart, batch []record.Record) error
	// sync makes what write appended for partition p durable.
	sync(fp *filePart, p int32) error
	// synced is the size of the staging file holding partition p at its
	// last successful sync (0 before any).
	synced(p int32) int64
	// setFloor records the bytes that were durable at the last commit:
	// recovery may cut a damaged staging file past them, never below.
	setFloor(floor int64)
	// publish makes the staging, whose directory holds entries, out.
	publish(ctx context.Context, out output, entries []os.DirEntry) error
	// close closes the staging files; they stay on disk.
	close() error
}

// stagedParts are the partitions whose staging a stager opened.
type stagedParts struct {
	mu    *sync.Mutex // Sink.mu
	dir   string
	parts map[int32]*filePart // guarded by mu
}

func (st *stagedParts) opened(p int32) *filePart { return st.parts[p] }

func (st *stagedParts) active() bool { return len(st.parts) > 0 }

// filePart is one partition's staging: its own staging file (partStager),
// or the shared one, which only sharedStager writes, and its encoding buffer.
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
	lb      lineBuf
}

// runIDFile names the staging directory's run: staging of another run is
// discarded, never mixed into this run's output.
const runIDFile = "RUN"

// part returns partition p's staging, opening it on first use.
func (s *Sink) part(p int32) (*filePart, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fp := s.stage.opened(p); fp != nil {
		return fp, nil
	}
	if err := s.checkStagingDir(); err != nil {
		return nil, err
	}
	if !s.stage.active() {
		if err := s.prepareStaging(); err != nil {
			return nil, fmt.Errorf("file sink: staging directory: %w", err)
		}
	}
	return s.stage.open(p)
}

// prepareStaging creates the staging directory, discarding one that belongs
// to another run. Called with s.mu held.
func (s *Sink) prepareStaging() error {
	dir := s.stagingDir()
	owner, err := os.ReadFile(filepath.Join(dir, runIDFile))
	switch {
	case err == nil && string(owner) == s.runID:
		return nil
	case err == nil || !errors.Is(err, os.ErrNotExist):
		s.log.Info().Str("staging", absPath(dir)).Str("run", strings.TrimSpace(string(owner))).Str("this_run", s.runID).
			Msg("file sink: discarding staging left by another run (another plan, window or resolution): it is never published as this run's output")
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	default:
		if _, statErr := os.Stat(dir); statErr == nil {
			s.log.Info().Str("staging", absPath(dir)).Msg("file sink: discarding staging without a run identity (left by an older version or a crash while it was created)")
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil { // the staging directory's entry
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, runIDFile), []byte(s.runID))
}

// createStagingFile opens the staging file at path, after unshare; one it
// creates (created) has its directory entry fsynced, as CheckResume takes a
// missing file for lost records.
func createStagingFile(path string) (f *os.File, created bool, err error) {
	if err := unshare(path); err != nil {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, false, err
		}
		return f, true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	return f, false, err
}
