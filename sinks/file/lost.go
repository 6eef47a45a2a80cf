package file

import (
	"errors"
	"fmt"
	"os"

	"github.com/replay-tool/replay/sinks"
)

// lostError is the error of a staging that vanished or shrank during the
// run (its directory removed, a staging file deleted, replaced or cut):
// records below the group's commits were in it, and neither this run nor
// a resume can publish them. It wraps sinks.ErrLost.
func lostError(what string) error {
	return fmt.Errorf("file sink: %s during the run, after records staged in it were committed: %w; the output cannot be published whole", what, sinks.ErrLost)
}

// checkStaged returns a lostError when partition p's staging file is no
// longer the file this process writes, at its path (deleted, its directory
// removed, replaced), or holds less than its last Sync made durable.
// Write and Sync go on into a deleted file without an error, and Finish
// would publish what the path holds then.
func (s *Sink) checkStaged(p int32) error {
	s.mu.Lock()
	fp, path := s.stage.opened(p), s.stage.file(p)
	s.mu.Unlock()
	if fp == nil {
		return nil
	}
	// The durable size first: another partition's Sync may move it past
	// a file size read before it.
	synced := s.stage.synced(p)
	size, err := s.checkSame(fp.f, path)
	if err != nil {
		return err
	}
	if size < synced {
		return lostError(fmt.Sprintf("the staging file %s was cut to %d bytes, below the %d bytes made durable", absPath(path), size, synced))
	}
	return nil
}

// checkSame returns a lostError when path is not the open file f, else
// the size of the file.
func (s *Sink) checkSame(f *os.File, path string) (int64, error) {
	open, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("file sink: %w", err)
	}
	at, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, lostError(fmt.Sprintf("the staging file %s was deleted (or its directory %s removed)", absPath(path), absPath(s.stagingDir())))
	case err != nil:
		return 0, fmt.Errorf("file sink: %w", err)
	case !os.SameFile(open, at):
		return 0, lostError(fmt.Sprintf("the staging file %s was replaced by another file", absPath(path)))
	}
	return at.Size(), nil
}

// checkOpened is checkSame for every staging file this process opened,
// before Finish publishes them. Called with s.mu held.
func (s *Sink) checkOpened() error {
	switch st := s.stage.(type) {
	case *partStager:
		for p, fp := range st.parts {
			if _, err := s.checkSame(fp.f, st.file(p)); err != nil {
				return err
			}
		}
	case *sharedStager:
		if st.shared != nil {
			_, err := s.checkSame(st.shared.f, st.path())
			return err
		}
	}
	return nil
}

// checkStagingDir returns a lostError when the staging directory is gone
// while this process staged records in it, or resumed a run whose staging
// CheckResume found there. Called with s.mu held.
func (s *Sink) checkStagingDir() error {
	if !s.stage.active() && !s.resumed {
		return nil
	}
	if _, err := os.Stat(s.stagingDir()); errors.Is(err, os.ErrNotExist) {
		return lostError(fmt.Sprintf("the staging directory %s was removed", absPath(s.stagingDir())))
	} else if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}
