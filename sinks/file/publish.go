package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/replay-tool/replay/internal/atomicfile"
)

// output is what Finish publishes the staging as: one file at Path, or
// with perPartition one file per partition (Path holds {partition}).
type output struct {
	Path         string // Config.Path
	perPartition bool
	enc          encoder
}

// partitionPath is the output file of partition p with perPartition.
func (o output) partitionPath(p int32) string {
	return strings.ReplaceAll(o.Path, PartitionPlaceholder, strconv.Itoa(int(p)))
}

// Finish publishes the staged output: partition files concatenated in
// partition order into Path (after the header row of a CSV file), or with
// PerPartition each partition's into its own file, atomically, and records
// next to each its provenance (.NAME.replay). With no staging (an empty
// window), it publishes an empty file (a CSV file's header row) at each
// output path, unless the file there is what this run published already (a
// re-run of a finished plan). Staging of another run is discarded, never
// published.
func (s *Sink) Finish(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.stagingDir()
	if err := s.checkStagingDir(); err != nil {
		return err
	}
	if err := s.checkOpened(); err != nil {
		return err
	}
	if err := os.RemoveAll(s.doneDir()); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if !s.stage.active() {
		// prepareStaging discards staging of another run, keeps this run's.
		if _, err := os.Stat(dir); err == nil {
			if err := s.prepareStaging(); err != nil {
				return fmt.Errorf("file sink: staging directory: %w", err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return s.publishEmpty()
	}
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if err := s.stage.publish(ctx, s.output, entries); err != nil {
		return err
	}
	for _, path := range s.outputPaths(stagedPartitions(entries)) {
		if err := markPublished(path, s.runID); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
	}
	return s.dropStaging()
}

// dropStaging removes the published staging directory. Called with s.mu
// held.
func (s *Sink) dropStaging() error {
	s.stage.close()
	s.resumed = false
	// Rename, then remove: a crash halfway through os.RemoveAll must not
	// leave a partial staging directory for the next Finish to publish.
	if err := os.Rename(s.stagingDir(), s.doneDir()); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	// Durable before the removal: a power loss must not bring it back.
	if err := atomicfile.SyncDir(filepath.Dir(s.stagingDir())); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return os.RemoveAll(s.doneDir())
}

// publish concatenates the staging files in partition order into out; with
// perPartition, each is its own file, a JSONL one linked rather than copied.
func (st *partStager) publish(ctx context.Context, out output, entries []os.DirEntry) error {
	parts := stagedPartitions(entries)
	if !out.perPartition {
		if err := st.concat(ctx, out.Path, parts); err != nil {
			return fmt.Errorf("file sink: publish %s: %w", out.Path, err)
		}
		return nil
	}
	for _, p := range parts {
		var err error
		if st.enc.verbatim() {
			err = st.link(ctx, p, out.partitionPath(p))
		} else {
			err = st.concat(ctx, out.partitionPath(p), []int32{p})
		}
		if err != nil {
			return fmt.Errorf("file sink: publish %s: %w", out.partitionPath(p), err)
		}
	}
	return nil
}

// stagedPartitions returns the partitions of entries' partition-N.jsonl, in
// order.
func stagedPartitions(entries []os.DirEntry) []int32 {
	var parts []int32
	for _, e := range entries {
		n := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "partition-"), ".jsonl")
		if p, err := strconv.ParseInt(n, 10, 32); err == nil && n != e.Name() {
			parts = append(parts, int32(p))
		}
	}
	slices.Sort(parts)
	return parts
}

// concat publishes the header and the output lines of the staging files of
// parts, in order, as path (atomicfile.Write).
func (st *partStager) concat(ctx context.Context, path string, parts []int32) error {
	return atomicfile.Write(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.Write(st.enc.header()); err != nil {
			return err
		}
		for _, p := range parts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := st.appendCompleteLines(w, p); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}

// appendCompleteLines writes the output lines of the complete lines of
// partition p's staging file to dst.
func (st *partStager) appendCompleteLines(dst io.Writer, p int32) error {
	f, err := os.Open(st.file(p))
	if err != nil {
		return err
	}
	defer f.Close()
	end, err := st.end(p, f)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return st.enc.copyLines(dst, io.LimitReader(f, end))
}

// link publishes the complete lines of partition p's JSONL staging file as
// dst, fsynced and linked over it.
func (st *partStager) link(ctx context.Context, p int32, dst string) error {
	path := st.file(p)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	end, err := st.end(p, f)
	if err != nil {
		return err
	}
	if err := f.Truncate(end); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return linkOver(ctx, path, dst, end)
}

// publish publishes the complete lines of the staging file (recovered when
// an earlier process left it), fsynced, by linkOver; without one, out is
// created empty.
func (st *sharedStager) publish(ctx context.Context, out output, _ []os.DirEntry) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("file sink: publish %s: %w", out.Path, err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	if st.shared == nil {
		if _, err := os.Stat(st.path()); errors.Is(err, os.ErrNotExist) {
			return atomicfile.WriteBytes(out.Path, nil)
		}
		if st.shared, err = openShared(st.path(), st.floor); err != nil {
			return err
		}
	}
	sh := st.shared
	sh.mu.Lock()
	size, broken := sh.size, sh.broken
	sh.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("an earlier write failed and could not be undone: %w", broken)
	}
	if err := sh.f.Truncate(size); err != nil {
		return err
	}
	if err := sh.sync(); err != nil {
		return err
	}
	return linkOver(ctx, st.path(), out.Path, size)
}

// linkOver makes dst a hard link to src atomically (a link under a
// temporary name renamed over dst, the directory fsynced), or, without
// hard links, a copy of src's first size bytes. src stays.
func linkOver(ctx context.Context, src, dst string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return atomicfile.SyncDir(filepath.Dir(dst)) // published before a crash: renaming a link over itself would leave the link
		}
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-link")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Link(src, tmp); err != nil {
		if !linksUnsupported(err) {
			return err
		}
		return copyOver(ctx, src, dst, size)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(dst))
}

// copyOver publishes src's first size bytes as dst (atomicfile.Write).
func copyOver(ctx context.Context, src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Write(dst, func(f *os.File) error {
		if _, err := io.Copy(f, io.LimitReader(in, size)); err != nil {
			return err
		}
		return ctx.Err()
	})
}

// linksUnsupported reports whether os.Link's err says the file system
// cannot hard-link (FAT, some network and FUSE file systems).
func linksUnsupported(err error) bool {
	return slices.ContainsFunc([]syscall.Errno{syscall.EPERM, syscall.EXDEV, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP, syscall.ENOSYS},
		func(errno syscall.Errno) bool { return errors.Is(err, errno) })
}
