//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package flock

// Lock does nothing on systems without flock(2): two processes writing
// the same output are not detected there.
type Lock struct{ path string }

// Acquire takes no lock here.
func Acquire(path string) (*Lock, error) { return &Lock{path: path}, nil }

// Release releases nothing.
func (l *Lock) Release() error { return nil }
