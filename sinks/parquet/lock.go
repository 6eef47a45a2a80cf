package parquet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/replay-tool/replay/internal/flock"
)

// lockName is the lock file in the staging directory: a name that no
// topic's directory takes (TopicDir writes no '@').
const lockName = "@lock"

// lockStaging takes the staging directory's lock. Two sinks staging in
// one directory (two plans with the same path or url, two processes of a
// plan) would overwrite each other's staging files, or remove them as
// another run's: the second fails at once, naming the holder.
func lockStaging(dir string) (*flock.Lock, error) {
	path := filepath.Join(dir, lockName)
	l, err := flock.Acquire(path)
	if errors.Is(err, flock.ErrHeld) {
		holder := "another replay process"
		if h, ok := flock.ReadHolder(path); ok {
			holder += " (" + h.String() + ")"
		}
		return nil, fmt.Errorf("parquet sink: %s holds the staging directory %s (lock %s): two runs staging there would overwrite each other's staging files; "+
			"wait for the other run to finish or stop it, or give each plan its own path (or url), and so its own staging directory",
			holder, absPath(dir), absPath(path))
	}
	if err != nil {
		return nil, fmt.Errorf("parquet sink: lock the staging directory: %w", err)
	}
	return l, nil
}

// clearStaging removes what the staging directory holds but its lock.
func (s *Sink) clearStaging() error {
	entries, err := os.ReadDir(s.stagingDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != lockName {
			errs = append(errs, os.RemoveAll(filepath.Join(s.stagingDir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// absPath is path made absolute for messages (path itself if it cannot be).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
