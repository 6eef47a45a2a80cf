package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// syncer makes the writer's commits durable: it takes the groups committed
// so far, syncs the WAL file once and acknowledges their Writes, while the
// writer (synchronous=NORMAL: commits do not sync) goes on with the next
// group: a commit's frames are durable once the WAL file is synced after
// it, which is what synchronous=FULL does inside the commit. A failed sync
// fails the Writes waiting for it and every later one (the sink cannot
// tell what is on disk).
func (s *Sink) syncer() {
	defer close(s.syncDone)
	for group := range s.toSync {
		groups := [][]*writeReq{group}
	more:
		for {
			select {
			case g, ok := <-s.toSync:
				if !ok {
					break more
				}
				groups = append(groups, g)
			default:
				break more
			}
		}
		err := s.syncErr.Load()
		if err == nil {
			if e := s.wal.sync(); e != nil {
				e = fmt.Errorf("sqlite sink: sync the WAL of %s: %w; the batches since the last sync are not committed: re-run to resume from there", s.path, e)
				s.syncErr.set(e)
			}
			err = s.syncErr.Load()
		}
		for _, g := range groups {
			s.acknowledge(g, err)
		}
	}
}

// stickyErr is an error that, once set, stays.
type stickyErr struct{ p atomic.Pointer[error] }

func (e *stickyErr) Load() error {
	if p := e.p.Load(); p != nil {
		return *p
	}
	return nil
}

// set sets the error unless one was set before.
func (e *stickyErr) set(err error) { e.p.CompareAndSwap(nil, &err) }

// walFile is the database's WAL file, opened to be synced.
type walFile struct {
	path string
	f    *os.File
	// syncFile syncs f: (*os.File).Sync, but in tests.
	syncFile func(*os.File) error
}

// openWAL opens path's WAL file (there once the database is in WAL mode
// and was read). SQLite names it after the database file with symbolic
// links resolved, and so does openWAL.
func openWAL(path string) (*walFile, error) {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return &walFile{path: path + "-wal", f: f, syncFile: (*os.File).Sync}, nil
}

// sync syncs the WAL file, after checking that the file open is still the
// one at its path (SQLite removes the WAL only when its last connection
// closes, which the sink's own connections prevent; a sync of a removed
// file would make nothing durable).
func (w *walFile) sync() error {
	open, err := w.f.Stat()
	if err != nil {
		return err
	}
	now, err := os.Stat(w.path)
	if err != nil {
		return err
	}
	if !os.SameFile(open, now) {
		return fmt.Errorf("%s was replaced while the sink wrote to it", w.path)
	}
	return w.syncFile(w.f)
}

func (w *walFile) close() {
	if w != nil {
		_ = w.f.Close()
	}
}
