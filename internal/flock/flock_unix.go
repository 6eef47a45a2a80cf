//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package flock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Lock is a lock Acquire took.
type Lock struct {
	path string
	f    *os.File
}

// Acquire takes the lock at path, creating the file (and its directory),
// without waiting: ErrHeld when another open file holds it. It records
// this process in the file.
func Acquire(path string) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			// The directory is gone (a holder removing it as it let go):
			// create it again.
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, ErrHeld
			}
			return nil, err
		}
		// The holder removes the file before releasing the lock (Release):
		// a lock taken on a file that is no longer at path is no lock.
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			_ = f.Truncate(0)
			_, _ = f.WriteAt(self(), 0)
			return &Lock{path: path, f: f}, nil
		}
		f.Close()
		if err1 != nil {
			return nil, err1
		}
	}
}

// Release removes the lock file, then releases the lock. A nil Lock, or
// one released before, releases nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, fs.ErrNotExist) {
		rmErr = nil
	}
	err := errors.Join(rmErr, l.f.Close())
	l.f = nil
	return err
}
