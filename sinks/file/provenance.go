package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/internal/atomicfile"
	"github.com/replay-tool/replay/sinks"
)

// provenance is what a file sink records, next to each file it published
// (.NAME.replay), about it: the run that published it and the file's size
// and modification time then. A file at an output path whose provenance
// does not match it was not written by replay, or was changed since: a
// run refuses to replace it unless the plan says overwrite: true.
type provenance struct {
	Run   string `json:"run"`
	Size  int64  `json:"size"`
	ModNS int64  `json:"mtime_ns"`
}

// provenancePath is the provenance file of the output file out.
func provenancePath(out string) string {
	return filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".replay")
}

// readProvenance returns the provenance of out when it matches the file
// there (size and modification time as recorded): "", false when out was
// not published by replay, or changed since.
func readProvenance(out string) (run string, ok bool) {
	st, err := os.Stat(out)
	if err != nil {
		return "", false
	}
	b, err := os.ReadFile(provenancePath(out))
	if err != nil {
		return "", false
	}
	var p provenance
	if json.Unmarshal(b, &p) != nil || p.Size != st.Size() || p.ModNS != st.ModTime().UnixNano() {
		return "", false
	}
	return p.Run, true
}

// markPublished records that run published out as it is now.
func markPublished(out, run string) error {
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(provenance{Run: run, Size: st.Size(), ModNS: st.ModTime().UnixNano()})
	return atomicfile.WriteBytes(provenancePath(out), append(b, '\n'))
}

// checkForeign refuses output files at cfg's path(s) that replay did not
// publish (or that changed since), unless cfg.Overwrite: publishing would
// replace them. A path with staging (a run in progress or interrupted
// there) is replay's.
func checkForeign(cfg Config, staging string) error {
	if cfg.Overwrite {
		return nil
	}
	if _, err := os.Stat(staging); err == nil {
		return nil
	}
	paths := []string{cfg.Path}
	if cfg.PerPartition {
		matches, _ := filepath.Glob(strings.ReplaceAll(globEscape(cfg.Path), globEscape(PartitionPlaceholder), "*"))
		paths = paths[:0]
		for _, m := range matches {
			if isPartitionPath(cfg.Path, m) {
				paths = append(paths, m)
			}
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue // missing; a directory or device is checkOutputPath's to refuse
		}
		if _, ok := readProvenance(p); !ok {
			return sinks.Refusal(fmt.Sprintf("file sink: %s holds a file that replay did not write, or that changed since replay published it (no matching %s): the run would replace it. Move it away or choose another path; or set overwrite: true in the sink to replace it",
				absPath(p), filepath.Base(provenancePath(p))))
		}
	}
	return nil
}

// isPartitionPath reports whether path is pattern with every {partition}
// replaced by one partition number.
func isPartitionPath(pattern, path string) bool {
	before, _, _ := strings.Cut(pattern, PartitionPlaceholder)
	rest, ok := strings.CutPrefix(path, before)
	for i := 1; ok && i <= len(rest) && '0' <= rest[i-1] && rest[i-1] <= '9'; i++ {
		n := rest[:i]
		if _, err := strconv.ParseUint(n, 10, 31); err == nil && strings.ReplaceAll(pattern, PartitionPlaceholder, n) == path {
			return true
		}
	}
	return false
}

// outputPaths are the output files: Path, or with per_partition those of
// parts.
func (s *Sink) outputPaths(parts []int32) []string {
	if !s.perPartition {
		return []string{s.Path}
	}
	paths := make([]string, len(parts))
	for i, p := range parts {
		paths[i] = s.partitionPath(p)
	}
	return paths
}

// publishEmpty publishes the output of a run that staged nothing (an empty
// window): an empty file (a CSV file's header row) at each output path
// (with per_partition, one per partition of the run), replacing what is
// there, unless the file there is what this very run published already (a
// re-run of a finished plan).
func (s *Sink) publishEmpty() error {
	for _, path := range s.outputPaths(s.partitions) {
		if run, ok := readProvenance(path); ok && run == s.runID {
			continue
		}
		if err := atomicfile.WriteBytes(path, s.enc.header()); err != nil {
			return fmt.Errorf("file sink: publish %s: %w", path, err)
		}
		if err := markPublished(path, s.runID); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
	}
	return nil
}
