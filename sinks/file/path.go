package file

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/replay-tool/replay/internal/flock"
)

// The files of a file sink writing Path: the staging directory Path+".parts"
// (see stager), the directory Finish moves it to before removing it, and the
// lock file.

func (s *Sink) stagingDir() string { return s.Path + ".parts" }

// doneDir is where Finish moves the published staging directory to delete it.
func (s *Sink) doneDir() string { return s.Path + ".parts-done" }

// lockPath is the lock file that keeps a second process off the output: a
// hidden file next to it (not in the staging directory, which a run of
// another identity removes), there while a process writes the output.
func (s *Sink) lockPath() string {
	return filepath.Join(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".lock")
}

// lockHolder names the process holding the lock at path, as its lock file
// records it ("" when unknown).
func lockHolder(path string) string {
	if h, ok := flock.ReadHolder(path); ok {
		return " by " + h.String()
	}
	return ""
}

// absPath is path made absolute for messages (path itself if it cannot be).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// checkOutputPath refuses an output path that cannot be published, before
// the run starts (it failed at publish, after the whole window had been
// replayed and committed): a path naming a directory, a directory in the
// way of a partition's file of a per_partition pattern, a file in the way
// of its directories.
func checkOutputPath(path string, perPartition bool) error {
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)) {
		return fmt.Errorf("file sink: path %q ends in %q: it names a directory; give the file to write, e.g. %s", path, string(path[len(path)-1]), filepath.Join(path, "out.jsonl"))
	}
	if !perPartition {
		st, err := os.Stat(path)
		switch {
		case err != nil:
			return nil // missing (or unreadable: MkdirAll or publish says why)
		case st.IsDir():
			return fmt.Errorf("file sink: path %s is a directory: give the file to write, e.g. %s", absPath(path), filepath.Join(path, "out.jsonl"))
		case !st.Mode().IsRegular():
			return fmt.Errorf("file sink: path %s is not a regular file (%v): publishing renames a new file over it; give a file path", absPath(path), st.Mode().Type())
		}
		return nil
	}
	return checkPartitionPaths(path)
}

// checkPartitionPaths checks each level of the per_partition pattern path
// that holds the placeholder: what exists there for some partition must be
// a directory, except at the last level, where it must not be.
func checkPartitionPaths(path string) error {
	elems := strings.Split(filepath.ToSlash(path), "/")
	for i, el := range elems {
		if !strings.Contains(el, PartitionPlaceholder) {
			continue
		}
		prefix := strings.Join(elems[:i+1], "/")
		literal := strings.Split(prefix, PartitionPlaceholder)
		quoted := make([]string, len(literal))
		for j, l := range literal {
			quoted[j] = regexp.QuoteMeta(l)
			literal[j] = globEscape(l)
		}
		re := regexp.MustCompile("^" + strings.Join(quoted, "[0-9]+") + "$")
		matches, _ := filepath.Glob(filepath.FromSlash(strings.Join(literal, "*")))
		last := i == len(elems)-1
		for _, m := range matches {
			if !re.MatchString(filepath.ToSlash(m)) {
				continue
			}
			st, err := os.Stat(m)
			switch {
			case err != nil:
			case last && st.IsDir():
				return fmt.Errorf("file sink: path %q: %s, a partition's output file, is a directory: remove it or change the path", path, absPath(m))
			case !last && !st.IsDir():
				return fmt.Errorf("file sink: path %q: %s is not a directory (a file is in the way of a partition's output): remove it or change the path", path, absPath(m))
			}
		}
	}
	return nil
}

// globEscape quotes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(s)
}

// firstNonDir returns the deepest existing element of dir when it is not a
// directory: what is in the way of MkdirAll (else dir, absolute).
func firstNonDir(dir string) string {
	abs := absPath(dir)
	for p := abs; ; {
		if st, err := os.Stat(p); err == nil {
			if !st.IsDir() {
				return p
			}
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	return abs
}
