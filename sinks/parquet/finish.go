package parquet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/replay-tool/replay/internal/atomicfile"
	"github.com/replay-tool/replay/sinks"
)

// ManifestName is the manifest's name at the top of the output.
const ManifestName = "_manifest.json"

// Manifest is what _manifest.json holds: the plan's fingerprint, the run's
// identity, the rows of all objects, and each object of the run's ranges
// in name order.
type Manifest struct {
	Fingerprint string `json:"fingerprint"`
	Run         string `json:"run"`
	// Shards is the shard count of the sharded run that wrote it.
	Shards  int          `json:"shards,omitempty"`
	Rows    int64        `json:"rows"`
	Objects []objectInfo `json:"objects"`
}

// runFile names, in the staging directory, the run that staged there: a
// name no topic's directory takes (TopicDir never writes '@'), so a topic
// named "run" stages beside it. legacyRunFile is its name in staging
// directories of earlier versions.
const (
	runFile       = "@run"
	legacyRunFile = "run"
)

// stagedRun reads which run staged in the staging directory: its runFile,
// else an earlier version's legacyRunFile (a regular file, not a topic's
// directory).
func (s *Sink) stagedRun() ([]byte, error) {
	run, err := os.ReadFile(filepath.Join(s.stagingDir, runFile))
	if !errors.Is(err, fs.ErrNotExist) {
		return run, err
	}
	legacy := filepath.Join(s.stagingDir, legacyRunFile)
	if st, lerr := os.Lstat(legacy); lerr == nil && st.Mode().IsRegular() {
		return os.ReadFile(legacy)
	}
	return nil, err
}

// checkManifest refuses an output whose manifest is another plan's, and
// returns the manifest (nil when there is none).
func (s *Sink) checkManifest(ctx context.Context) (*Manifest, error) {
	m, err := s.readManifest(ctx)
	if err != nil || m == nil {
		return nil, err
	}
	if m.Fingerprint != s.fingerprint {
		return nil, sinks.Refusal(fmt.Sprintf("parquet sink: %s is the manifest of another plan, or of another version or shard split of this plan (fingerprint %s, this run's is %s): write to %s, or move the output away",
			s.st.Where(ManifestName), m.Fingerprint, s.fingerprint, s.otherOutput()))
	}
	return m, nil
}

// checkSiblings refuses a shard's output beside the output of another
// sharding of the window: a sibling (Config.Siblings) whose manifest a run
// of another shard count wrote.
func checkSiblings(ctx context.Context, cfg Config) error {
	for _, where := range cfg.Siblings {
		sib := &Sink{st: dirStore{dir: where}}
		if cfg.S3 != nil {
			c := *cfg.S3
			c.URL = where
			st, err := newS3Store(c)
			if err != nil {
				return err
			}
			sib.st = st
		}
		m, err := sib.readManifest(ctx)
		if err != nil {
			return err
		}
		if m != nil && m.Shards != 0 && m.Shards != cfg.Shards { // 0: a manifest of an earlier version, which did not say
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s is the manifest of a run of %s, beside this run's shard of %d: two shardings of the window side by side would be read as one; move the earlier output away, or write to another path or url",
				sib.st.Where(ManifestName), plural(m.Shards, "shard"), cfg.Shards))
		}
	}
	return nil
}

func (s *Sink) readManifest(ctx context.Context) (*Manifest, error) {
	rc, err := s.st.Open(ctx, ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.NewSectionReader(rc, 0, rc.Size()))
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, sinks.Refusal(fmt.Sprintf("parquet sink: %s is not a manifest replay wrote (%v): write to %s, or move it away", s.st.Where(ManifestName), err, s.otherOutput()))
	}
	return &m, nil
}

// loadChains reads the objects already published under the topic's
// directory: each must be this run's (kept: the run writes them again,
// byte for byte), and each partition's tile its range from the start.
// Anything else is refused, and so is m, the output's manifest, when
// another run wrote it: readers of the output would read both runs.
func (s *Sink) loadChains(ctx context.Context, m *Manifest) error {
	prefix := TopicDir(s.topic) + "/"
	listed, err := s.st.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("parquet sink: list %s: %w", s.st.Where(prefix), err)
	}
	found := map[int32][]span{}
	var others []string // objects of other runs outside the run's ranges
	var strays []string // files that are not objects, which readers would read
	var otherRun, otherFP string
	for _, name := range slices.Sorted(maps.Keys(listed)) {
		p, sp, ok := parseObject(strings.TrimPrefix(name, prefix))
		if !ok {
			// A key ending in '/' is a directory marker some S3 tools
			// write: readers read no rows from it.
			if !hidden(strings.TrimPrefix(name, prefix)) && !strings.HasSuffix(name, "/") {
				strays = append(strays, name)
			}
			continue
		}
		ft, err := s.footerOf(ctx, name)
		if err != nil {
			return fmt.Errorf("parquet sink: read %s: %w", s.st.Where(name), err)
		}
		run, fp := ft.run, ft.fingerprint
		pt := s.parts[p]
		inRange := pt != nil && sp.first < pt.rng.End && sp.end > pt.rng.Start
		switch {
		case run == s.runID && ft.object != "" && ft.object != name:
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s holds the rows of %s, as its footer says (a copy or a rename): readers would read those rows twice and miss its own; "+
				"move it away (a run writes the object its name says) or write to %s", s.st.Where(name), s.st.Where(ft.object), s.otherOutput()))
		case run == s.runID && !inRange:
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s is outside what this run writes (%s), though its footer names this run: a copy; move it away or write to %s",
				s.st.Where(name), s.rangeText(p), s.otherOutput()))
		case run != s.runID && inRange:
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s is in this run's range of partition %d but %s: move it away or write to %s",
				s.st.Where(name), p, whose(run), s.otherOutput()))
		case run != s.runID:
			if len(others) == 0 {
				otherRun, otherFP = run, fp
			}
			others = append(others, name)
		case inRange:
			found[p] = append(found[p], sp)
		}
	}
	if len(strays) > 0 {
		return sinks.Refusal(fmt.Sprintf("parquet sink: %s holds %s not named as objects are (<partition>/<first>-<end>.parquet), the first %s: "+
			"readers of the output (Spark, Trino, DuckDB's globs) would read such files with the run's objects. Move them away (files and directories whose names start with '.' or '_' are skipped by readers, and left alone here), or write to %s",
			s.st.Where(prefix), plural(len(strays), "file"), s.st.Where(strays[0]), s.otherOutput()))
	}
	if err := s.refuseEarlier(m, others, otherRun, otherFP); err != nil {
		return err
	}
	for p, spans := range found {
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.first, b.first) })
		pt := s.parts[p]
		at := pt.rng.Start
		for i, sp := range spans {
			if sp.first != at {
				return s.untiled(p, pt.rng, spans, i, at)
			}
			at = sp.end
		}
		pt.chain, pt.first, pt.next, pt.synced = spans, at, at, at
		pt.finished = at == pt.rng.End && len(spans) > 0
	}
	return nil
}

// untiled refuses partition p's objects of this run (spans, sorted by
// their first offset) that do not tile its range rng from its start:
// spans[i] starts elsewhere than at, where the objects before it end. The
// refusal names the objects and what is wrong between them: a gap (an
// object deleted) or an overlap (an object of another max_rows_per_file).
func (s *Sink) untiled(p int32, rng sinks.Range, spans []span, i int, at int64) error {
	sp := spans[i]
	what := fmt.Sprintf("no object holds offsets [%d, %d)", at, sp.first)
	if sp.first < at {
		prev := spans[i-1]
		what = fmt.Sprintf("it overlaps %s", s.st.Where(ObjectName(s.topic, p, prev.first, prev.end)))
	}
	const shown = 8
	var names []string
	for _, o := range spans[:min(len(spans), shown)] {
		names = append(names, s.st.Where(ObjectName(s.topic, p, o.first, o.end)))
	}
	if len(spans) > shown {
		names = append(names, fmt.Sprintf("and %d more", len(spans)-shown))
	}
	return sinks.Refusal(fmt.Sprintf("parquet sink: the objects of partition %d do not tile its range [%d, %d) from its start: %s starts at offset %d where %d was expected (%s). "+
		"Its objects: %s. Move them away (a run writes them again) or write to %s",
		p, rng.Start, rng.End, s.st.Where(ObjectName(s.topic, p, sp.first, sp.end)), sp.first, at, what, strings.Join(names, ", "), s.otherOutput()))
}

// refuseEarlier refuses an output that holds objects of other runs
// outside this run's ranges (others, the first written by run otherRun
// of the plan otherFP), or a manifest m of another run.
func (s *Sink) refuseEarlier(m *Manifest, others []string, otherRun, otherFP string) error {
	var found []string
	if len(others) > 0 {
		w := whose(otherRun)
		if otherRun != "" && otherFP == s.fingerprint {
			w = "an earlier run of this plan wrote it (run " + otherRun + ")"
		}
		are, first := "are", "the first "
		if len(others) == 1 {
			are, first = "is", ""
		}
		found = append(found, fmt.Sprintf("%s that %s not this run's, %s%s: %s", plural(len(others), "object"), are, first, s.st.Where(others[0]), w))
	}
	if m != nil && m.Run != s.runID {
		found = append(found, fmt.Sprintf("the manifest %s of an earlier run of this plan (run %s, %d objects)", s.st.Where(ManifestName), m.Run, len(m.Objects)))
	}
	if len(found) == 0 {
		return nil
	}
	return sinks.Refusal(fmt.Sprintf("parquet sink: %s holds %s. This run (run %s: another resolution of the window, or another plan) would publish its objects and manifest among them, "+
		"and readers of the output would read both: write to a new path (or url prefix), or delete the earlier run's objects and manifest, then run again",
		s.st.Where(""), strings.Join(found, "; and "), s.runID))
}

// hidden reports whether rel, a slash-separated name, has a part that
// starts with '.' or '_': Spark, Hive, Trino and DuckDB's globs skip such
// files (_SUCCESS, .crc).
func hidden(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(part, ".") || strings.HasPrefix(part, "_") {
			return true
		}
	}
	return false
}

// plural is n and noun, with an s when n is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rangeText says what the run writes of partition p, for messages.
func (s *Sink) rangeText(p int32) string {
	pt := s.parts[p]
	if pt == nil {
		return fmt.Sprintf("it reads no partition %d of %s", p, s.topic)
	}
	return fmt.Sprintf("partition %d's range is [%d, %d)", p, pt.rng.Start, pt.rng.End)
}

// otherOutput is what a refusal suggests writing to instead: another path
// or another url, as the plan names the output.
func (s *Sink) otherOutput() string {
	if _, ok := s.st.(dirStore); ok {
		return "another path"
	}
	return "another url"
}

func whose(run string) string {
	if run == "" {
		return "replay did not write it"
	}
	return "another run wrote it (run " + run + ")"
}

// openStaging recovers the staging an earlier process of this run left:
// each partition's staging file of the object after its chain (a torn
// last frame cut off). Staging of another run is removed.
func (s *Sink) openStaging(ctx context.Context) error {
	run, err := s.stagedRun()
	if err == nil && string(run) != s.runID || err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Info().Str("staging", s.stagingDir).Msg("parquet sink: discarding staging of another run")
		if err := s.clearStaging(); err != nil {
			return fmt.Errorf("parquet sink: %w", err)
		}
	}
	if err := os.MkdirAll(s.stagingDir, 0o755); err != nil {
		return fmt.Errorf("parquet sink: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.stagingDir, runFile), []byte(s.runID), 0o644); err != nil {
		return fmt.Errorf("parquet sink: %w", err)
	}
	if st, err := os.Lstat(filepath.Join(s.stagingDir, legacyRunFile)); err == nil && st.Mode().IsRegular() {
		os.Remove(filepath.Join(s.stagingDir, legacyRunFile))
	}
	for _, pt := range s.partitions() {
		if err := s.recoverPart(ctx, pt); err != nil {
			return fmt.Errorf("parquet sink: recover the staging of partition %d: %w", pt.rng.Partition, err)
		}
	}
	return atomicfile.SyncDir(s.stagingDir)
}

// recoverPart opens the staging file of pt's next object, if any, and
// removes staging files of objects already published.
func (s *Sink) recoverPart(ctx context.Context, pt *part) error {
	dir := filepath.Dir(s.stagingFile(pt.rng.Partition, 0))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		first, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".rows"), 10, 64)
		if err != nil || first != pt.first || pt.finished {
			os.Remove(filepath.Join(dir, e.Name())) // published, or not a staging file
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		rows, next, err := recoverStaging(f, s.topic, pt.rng.Partition)
		if err != nil {
			f.Close()
			return err
		}
		pt.f, pt.rows = f, rows
		if s.lay == nil && rows > 0 {
			if pt.lay, err = s.stagedLayout(ctx, pt.rng.Partition, f); err != nil {
				return err
			}
		}
		if next > pt.next {
			pt.next, pt.synced = next, next
		}
	}
	return nil
}

// checkOverlap refuses to publish sp when another object of the
// partition (of an earlier run that was not finished, say) overlaps it.
func (s *Sink) checkOverlap(ctx context.Context, pt *part, sp span) error {
	prefix := fmt.Sprintf("%s/%d/", TopicDir(s.topic), pt.rng.Partition)
	names, err := s.st.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("parquet sink: list %s: %w", s.st.Where(prefix), err)
	}
	for name := range names {
		_, o, ok := parseObject(fmt.Sprintf("%d/", pt.rng.Partition) + strings.TrimPrefix(name, prefix))
		if ok && o != sp && o.first < sp.end && sp.first < o.end {
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s overlaps the object [%d, %d) this run writes: it holds another tiling of partition %d's offsets (another plan or resolution); move it away or write to %s",
				s.st.Where(name), sp.first, sp.end, pt.rng.Partition, s.otherOutput()))
		}
	}
	return nil
}

// Finish publishes each partition's last object, ending at its range's
// end (an empty range has none; a range without rows one without rows),
// then the manifest, and removes the staging and its lock (Close). A
// finished output is left as it is: a re-run changes nothing.
func (s *Sink) Finish(ctx context.Context) error {
	for _, pt := range s.partitions() {
		if err := s.finishPart(ctx, pt); err != nil {
			return err
		}
	}
	if err := s.writeManifest(ctx); err != nil {
		return err
	}
	if err := s.closeStaging(); err != nil {
		return fmt.Errorf("parquet sink: %w", err)
	}
	if err := s.clearStaging(); err != nil {
		return fmt.Errorf("parquet sink: %w", err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	// Empty now, unless another sink took the lock since Close.
	_ = os.Remove(s.stagingDir)
	return nil
}

func (s *Sink) finishPart(ctx context.Context, pt *part) error {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.broken != nil {
		return pt.broken
	}
	if pt.finished || pt.rng.Start >= pt.rng.End {
		return nil
	}
	if err := s.flushFrames(pt); err != nil {
		return err
	}
	if err := s.closeObject(ctx, pt, pt.rng.End); err != nil {
		return err
	}
	pt.finished = true
	return nil
}

// writeManifest writes the manifest of the run's objects, unless the one
// there says the same.
func (s *Sink) writeManifest(ctx context.Context) error {
	m := Manifest{Fingerprint: s.fingerprint, Run: s.runID, Shards: s.shards, Objects: []objectInfo{}}
	var kept []objectInfo // objects this process did not publish
	for _, pt := range s.partitions() {
		for _, sp := range pt.chain {
			name := ObjectName(s.topic, pt.rng.Partition, sp.first, sp.end)
			s.mu.Lock()
			info, ok := s.done[name]
			s.mu.Unlock()
			if !ok {
				var err error
				if info, err = s.describe(ctx, name); err != nil {
					return fmt.Errorf("parquet sink: read %s back for the manifest: %w", s.st.Where(name), err)
				}
				kept = append(kept, info)
			}
			m.Rows += info.Rows
			m.Objects = append(m.Objects, info)
		}
	}
	slices.SortFunc(m.Objects, func(a, b objectInfo) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if rc, err := s.st.Open(ctx, ManifestName); err == nil {
		old, err := io.ReadAll(io.NewSectionReader(rc, 0, rc.Size()))
		rc.Close()
		if err == nil && bytes.Equal(old, data) {
			return nil
		}
		if err == nil {
			if err := s.checkUnchanged(old, kept); err != nil {
				return err
			}
		}
	}
	if err := s.st.Replace(ctx, ManifestName, data); err != nil {
		return fmt.Errorf("parquet sink: write %s: %w", s.st.Where(ManifestName), err)
	}
	return nil
}

// checkUnchanged refuses kept objects whose bytes differ from what old,
// the run's own manifest, lists for them: such an object changed since the
// run published it, and a new manifest would vouch for the changed bytes.
func (s *Sink) checkUnchanged(old []byte, kept []objectInfo) error {
	var was Manifest
	if json.Unmarshal(old, &was) != nil || was.Run != s.runID {
		return nil
	}
	listed := map[string]objectInfo{}
	for _, o := range was.Objects {
		listed[o.Name] = o
	}
	for _, o := range kept {
		if w, ok := listed[o.Name]; ok && w.SHA256 != o.SHA256 {
			return sinks.Refusal(fmt.Sprintf("parquet sink: %s changed since this run published it: the manifest %s lists it with %d rows, sha256 %s, and it holds %d rows, sha256 %s now: "+
				"move it and the partition's later objects away (a re-run writes them again), or write to %s",
				s.st.Where(o.Name), s.st.Where(ManifestName), w.Rows, w.SHA256, o.Rows, o.SHA256, s.otherOutput()))
		}
	}
	return nil
}
