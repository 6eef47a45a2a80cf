// Package atomicfile writes files durably and atomically: a temporary file
// in the target's directory, fsynced, renamed over the target, and the
// directory fsynced, so that a reader or a crash sees the old file or the
// whole new one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write makes path the file that fill writes: a temporary file in
// path's directory (mode 0644), fsynced and renamed over path, and the
// directory fsynced. Readers of path see the old file or the whole new one.
func Write(path string, fill func(*os.File) error) error {
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
	return SyncDir(filepath.Dir(path))
}

// WriteBytes makes data the contents of path, durably and atomically.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// SyncDir fsyncs directory dir, making the entries created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
