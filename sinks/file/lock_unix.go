//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package file

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// outputLock is an exclusive flock(2) on a lock file: while one process
// holds it, another fails to take it at once (LOCK_NB) instead of writing
// the same staging files. The kernel releases it when the process dies, so
// a crash never leaves a stale lock behind.
type outputLock struct {
	path string
	f    *os.File
}

// errLocked reports a lock held by another open file (another process, or
// another sink of this one on the same output).
var errLocked = errors.New("lock held")

// lockOutput takes the lock at path, creating the file. It records the
// process ID in it for the message another process prints.
func lockOutput(path string) (*outputLock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errLocked
			}
			return nil, err
		}
		// The holder removes the file before releasing the lock (unlock):
		// a lock taken on a file that is no longer at path is no lock.
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return &outputLock{path: path, f: f}, nil
		}
		f.Close()
		if err1 != nil {
			return nil, err1
		}
	}
}

// unlock removes the lock file, then releases the lock.
func (l *outputLock) unlock() error {
	if l == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, os.ErrNotExist) {
		rmErr = nil
	}
	return errors.Join(rmErr, l.f.Close())
}

// linkCount is the number of hard links of the file fi describes.
func linkCount(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
