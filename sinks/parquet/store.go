package parquet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/replay-tool/replay/internal/atomicfile"
)

// store is where a parquet sink's objects go, by name ("orders/0/...":
// slash-separated, relative to the output's top). Its methods are safe for
// concurrent use.
type store interface {
	// PutNew publishes the whole of file local as name, unless an object
	// of that name exists: then it returns an error wrapping
	// fs.ErrExist and changes nothing. Readers never see part of it.
	PutNew(ctx context.Context, name string, local *os.File) error
	// Open opens name for reading at offsets; an error wrapping
	// fs.ErrNotExist when there is none.
	Open(ctx context.Context, name string) (objectReader, error)
	// List returns the objects whose names start with prefix, with their
	// sizes in bytes.
	List(ctx context.Context, prefix string) (map[string]int64, error)
	// Replace makes data the object name, whole, whatever was there.
	Replace(ctx context.Context, name string, data []byte) error
	// Where names the object for messages (an absolute path, a URL).
	Where(name string) string
}

// objectReader reads an object at offsets; Size is its size in bytes.
type objectReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// fileReader is an objectReader of a local file.
type fileReader struct {
	*os.File
	size int64
}

func (f fileReader) Size() int64 { return f.size }

// dirStore is a store in a local directory: each object a file, published
// by a hard link from a fsynced temporary file (link fails when the name
// exists: a conditional create).
type dirStore struct{ dir string }

var _ store = dirStore{}

func (d dirStore) path(name string) string { return filepath.Join(d.dir, filepath.FromSlash(name)) }

// Where is the object's absolute path.
func (d dirStore) Where(name string) string { return absPath(d.path(name)) }

// PutNew links local (fsynced) as name, then fsyncs name's directory.
func (d dirStore) PutNew(ctx context.Context, name string, local *os.File) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := local.Sync(); err != nil {
		return err
	}
	dst := d.path(name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(local.Name(), dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", d.Where(name), fs.ErrExist)
		}
		if !linksUnsupported(err) {
			return err
		}
		if err := copyNew(local, dst); err != nil {
			return err
		}
	}
	return atomicfile.SyncDir(filepath.Dir(dst))
}

// copyNew copies local to dst through a temporary file, renamed to dst
// only when nothing is there (a race with another writer of dst is not
// excluded where the file system has no hard links).
func copyNew(local *os.File, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s: %w", dst, fs.ErrExist)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := local.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(tmp, local); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// Open opens the object's file.
func (d dirStore) Open(ctx context.Context, name string) (objectReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(name))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return fileReader{File: f, size: fi.Size()}, nil
}

// List walks the directory under prefix; hidden files and directories
// (temporary files, the staging) are left out.
func (d dirStore) List(ctx context.Context, prefix string) (map[string]int64, error) {
	out := map[string]int64{}
	root := d.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		root = d.path(prefix[:i])
	}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != root {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return ctx.Err()
		}
		rel, err := filepath.Rel(d.dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		out[name] = fi.Size()
		return nil
	})
	return out, err
}

// Replace writes data to a temporary file, fsyncs it and renames it over
// name.
func (d dirStore) Replace(ctx context.Context, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return atomicfile.WriteBytes(d.path(name), data)
}

// linksUnsupported reports whether err, from os.Link, says the file system
// (FAT, some network and FUSE file systems) cannot hard-link the file.
func linksUnsupported(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.EXDEV, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP, syscall.ENOSYS} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
