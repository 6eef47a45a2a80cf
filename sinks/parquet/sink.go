// Package parquet is the parquet sink: each partition's resolved range is
// cut into Parquet objects of up to max_rows_per_file rows, named from
// their offsets (ObjectName), published whole, with a manifest written
// when the run completes.
package parquet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/atomicfile"
	"github.com/replay-tool/replay/internal/backoff"
	"github.com/replay-tool/replay/internal/flock"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
)

// Config configures a parquet sink.
type Config struct {
	// Path is the output directory (unused with S3).
	Path string
	// S3 is the S3-compatible store to write to instead of Path.
	S3 *S3
	// StagingDir is where records wait for their object (default
	// Path/.replay-staging).
	StagingDir string
	// Columns map the objects' columns to record fields (none: the
	// default layout); Types give value.<path> columns their types.
	Columns plan.Columns
	Types   map[string]string
	// MaxRowsPerFile is the most rows an object holds (default
	// DefaultMaxRowsPerFile).
	MaxRowsPerFile int64
	// Compression is the codec: zstd (default), snappy, gzip or none.
	Compression string
	// Topic is the source topic, Ranges the run's resolved ranges: a
	// partition's objects tile its range.
	Topic  string
	Ranges []sinks.Range
	// RunID identifies the resolved run and Fingerprint the plan: objects
	// and a manifest of another are refused.
	RunID, Fingerprint string
	// Shards is the shard count of the sharded run the sink writes one
	// shard of (0: not sharded); Siblings are the other shards' outputs
	// and the one past the last (paths, or urls in S3's store): one whose
	// manifest a run of another shard count wrote is refused, as two
	// shardings of a window side by side would be read as one.
	Shards   int
	Siblings []string
	// ValueColumns, when Columns is empty, gives each object the columns
	// of its records' decoded value: those of the schema of the object's
	// first decoded value (sinks.Options.ValueColumns). Provenance puts
	// kafka_topic, kafka_partition, kafka_offset and kafka_timestamp
	// before them.
	ValueColumns func(ctx context.Context, value []byte) ([]sinks.SchemaColumn, error)
	Provenance   bool
	// Log receives the sink's notices; default none.
	Log zerolog.Logger
}

// Sink writes Parquet objects. Records of a partition are staged, one
// frame each, in a hidden staging directory under Path (written on Write,
// fsynced on Sync); once an object has max_rows_per_file rows, the next
// record closes it: the object [first, that record's offset) is built
// from the staging file and published whole (a fsynced temporary file
// hard-linked to its name, which fails when the name exists). Finish
// publishes each partition's last object, ending at the range's end, and
// then the manifest. The same window always gives the same objects, byte
// for byte.
//
// A resumed run continues a partition where its objects and staging end
// (Reconcile), so an unfinished object is always built from its first
// offset. Write, Sync and Reconcile are safe for concurrent use.
//
// The sink holds a lock on its staging directory from New until Close (or
// a Finish that succeeded): another sink on the same directory, in this
// process or another, fails at once instead of overwriting its staging.
type Sink struct {
	st                 store
	stagingDir         string
	lock               *flock.Lock
	topic              string
	runID, fingerprint string
	shards             int // Config.Shards, in the manifest
	// lay is the objects' layout; nil when each object takes the layout
	// of its decoded values' schema (layoutOf).
	lay          *layout
	valueColumns func(ctx context.Context, value []byte) ([]sinks.SchemaColumn, error)
	provenance   bool
	layouts      sync.Map // layout key -> *layout
	codec        compress.Codec
	maxRows      int64
	log          zerolog.Logger

	// bctx ends the builders (Close). building counts the builders
	// running: at most maxBuilders, the others' objects are built from
	// their staging when they close (each builder holds a row group, its
	// pipeline and a compressor: one per partition would multiply the
	// sink's memory by the partitions).
	bctx     context.Context
	cancel   context.CancelFunc
	building atomic.Int32

	mu    sync.Mutex
	parts map[int32]*part
	// done are the objects this process published, by name.
	done map[string]objectInfo
}

// part is one partition's state.
type part struct {
	mu  sync.Mutex
	rng sinks.Range
	// chain are the partition's published objects, contiguous from the
	// range's start.
	chain []span
	// f is the staging file of the object being filled, first its first
	// offset, rows its records, next the offset after the last record
	// staged (or written to an object); synced is next at the last Sync.
	// buf holds the frames of the batch being written (from frameBufs;
	// nil between writes).
	f                 *os.File
	first, rows, next int64
	synced            int64
	buf               []byte
	broken            error
	finished          bool
	// lay is the layout of the object being filled; nil until its first
	// decoded value names one (with the sink's layout nil).
	lay *layout
	// seenCols and seenLay are the columns ValueColumns gave the last
	// decoded value and their layout (recordLayout).
	seenCols *sinks.SchemaColumn
	seenLay  *layout
	// bld builds the object being filled as its frames are staged; nil
	// for an object whose staging a crash left behind.
	bld *builder
}

var (
	_ sinks.Sink       = (*Sink)(nil)
	_ sinks.Syncer     = (*Sink)(nil)
	_ sinks.Reconciler = (*Sink)(nil)
)

// Open builds the parquet sink sp describes (a validated plan section of
// type parquet) for the run sp.Options describes (its topic and ranges).
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := section(&sp.Plan)
	var s3c *S3
	if c.URL != "" {
		s3c = &S3{URL: c.URL, Endpoint: c.Endpoint, Region: c.Region, ForcePathStyle: c.ForcePathStyle,
			AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey}
	}
	cfg := Config{Path: c.Path, S3: s3c, StagingDir: stagingDirOf(c), Columns: c.Columns, Types: c.Types, MaxRowsPerFile: c.maxRowsPerFile(),
		Compression: c.Compression, Topic: sp.Options.Topic, Ranges: sp.Options.Ranges, RunID: sp.Options.RunID,
		Fingerprint: sp.Options.Fingerprint, Log: sp.Options.Log, ValueColumns: sp.Options.ValueColumns, Provenance: c.Provenance,
		Shards: c.shards, Siblings: c.siblings}
	return openRetrying(ctx, cfg, time.Duration(sp.Plan.Retry.MaxElapsed))
}

// openRetrying is New, tried again while it fails with a transient error
// (a store that is unreachable or answers 5xx or 429, after the SDK's own
// retries) for up to budget (the section's retry.max_elapsed) from the
// first failure, as a write is: a failed New leaves nothing behind.
func openRetrying(ctx context.Context, cfg Config, budget time.Duration) (*Sink, error) {
	r := backoff.Policy{Min: 250 * time.Millisecond, Max: 10 * time.Second, Budget: budget}.Start()
	for {
		s, err := New(ctx, cfg)
		if err == nil || !sinks.Transient(err) {
			return s, err
		}
		wait, left, ok := r.Failed()
		if !ok {
			return nil, fmt.Errorf("%w (tried %s in the sink's retry.max_elapsed, %s)", err, plural(r.Attempts(), "time"), budget)
		}
		cfg.Log.Warn().Err(err).Int64("retry_in_ms", wait.Milliseconds()).Int64("budget_left_ms", left.Milliseconds()).Msg("parquet sink: opening the output failed; retrying")
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// New returns the parquet sink cfg describes, after checking what the
// output directory holds: a manifest of another plan, or objects in the
// run's ranges that are not this run's, are refused (sinks.ErrRefused).
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.Path == "" && cfg.S3 == nil {
		return nil, errors.New("parquet sink: no path and no S3 store")
	}
	if cfg.Ranges == nil {
		return nil, errors.New("parquet sink: the run's resolved ranges are unknown (sinks.Options.Ranges): objects are named after them")
	}
	var lay *layout
	if len(cfg.Columns) > 0 || cfg.ValueColumns == nil {
		ecols, err := encode.ParseColumns(cfg.Columns, defaultColumns, false)
		if err != nil {
			return nil, fmt.Errorf("parquet sink: %w", err)
		}
		cols, err := columns(ecols, cfg.Types)
		if err != nil {
			return nil, fmt.Errorf("parquet sink: %w", err)
		}
		lay = newLayout(cols)
	} else if len(cfg.Types) > 0 {
		return nil, errors.New("parquet sink: types: the columns of a decoded value take their types from its schema")
	}
	cd, err := codec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	var st store = dirStore{dir: cfg.Path}
	if cfg.S3 != nil {
		if st, err = newS3Store(*cfg.S3); err != nil {
			return nil, err
		}
	}
	staging := cmp.Or(cfg.StagingDir, filepath.Join(cfg.Path, stagingName))
	s := &Sink{st: st, stagingDir: staging, topic: cfg.Topic, shards: cfg.Shards,
		runID: cfg.RunID, fingerprint: cfg.Fingerprint, lay: lay, valueColumns: cfg.ValueColumns, provenance: cfg.Provenance, codec: cd,
		maxRows: cfg.MaxRowsPerFile, log: cfg.Log, parts: map[int32]*part{}, done: map[string]objectInfo{}}
	s.bctx, s.cancel = context.WithCancel(context.Background())
	if s.maxRows <= 0 {
		s.maxRows = DefaultMaxRowsPerFile
	}
	if fi, err := os.Stat(filepath.Clean(cfg.Path)); cfg.S3 == nil && err == nil && !fi.IsDir() {
		return nil, sinks.Refusal(fmt.Sprintf("parquet sink: path %s is a file, not a directory: name a directory (the objects and %s are written under it)", cfg.Path, ManifestName))
	}
	if err := checkSiblings(ctx, cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, fmt.Errorf("parquet sink: create the staging directory: %w (path, or for a url the user's cache directory, must be a directory replay can write)", err)
	}
	if s.lock, err = lockStaging(staging); err != nil {
		return nil, err
	}
	if err := s.open(ctx, cfg.Ranges); err != nil {
		err = errors.Join(err, s.Close())
		_ = os.Remove(staging) // when New made it, and left it empty
		return nil, err
	}
	return s, nil
}

// open reads what the output and the staging hold for ranges.
func (s *Sink) open(ctx context.Context, ranges []sinks.Range) error {
	for _, r := range ranges {
		s.parts[r.Partition] = &part{rng: r, first: r.Start, next: r.Start}
	}
	m, err := s.checkManifest(ctx)
	if err != nil {
		return err
	}
	if err := s.loadChains(ctx, m); err != nil {
		return err
	}
	return s.openStaging(ctx)
}

// Capabilities: durable on Sync, reconciled on a resume; a column of the
// idempotency key writes every record's.
func (s *Sink) Capabilities() sinks.Capabilities {
	keys := sinks.KeysUnused
	if s.lay != nil {
		keys = keyed(s.lay.cols)
	}
	return sinks.Capabilities{Syncer: s, Reconciler: s, Keys: keys}
}

func (s *Sink) part(p int32) (*part, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt, ok := s.parts[p]
	if !ok {
		return nil, fmt.Errorf("parquet sink: partition %d is not one of the run's ranges", p)
	}
	return pt, nil
}

// Write stages batch, records of one partition in offset order, closing
// and publishing the partition's object each time it is full. A record
// below what the partition already holds (a re-delivery) is skipped: the
// partition's staging or objects hold it. A value that its column cannot
// hold is a *record.Error; nothing of the batch past it is written.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	pt, err := s.part(batch[0].Partition)
	if err != nil {
		return err
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.broken != nil {
		return pt.broken
	}
	pt.buf = frameBuf()
	defer func() { recycleFrameBuf(pt.buf); pt.buf = nil }()
	for i := range batch {
		r := &batch[i]
		if r.Offset < pt.next {
			continue
		}
		if r.Offset >= pt.rng.End {
			return fmt.Errorf("parquet sink: partition %d offset %d is past the range's end %d", r.Partition, r.Offset, pt.rng.End)
		}
		lay, err := s.recordLayout(ctx, pt, r)
		if err != nil {
			return errors.Join(s.flushFrames(pt), err)
		}
		if pt.rows >= s.maxRows || lay != pt.lay && pt.lay != nil && pt.rows > 0 {
			if err := s.flushFrames(pt); err != nil {
				return err
			}
			if err := s.closeObject(ctx, pt, r.Offset); err != nil {
				return err
			}
		}
		if pt.lay == nil {
			pt.lay = lay
		}
		if pt.lay != nil {
			if err := checkRow(pt.lay.cols, r); err != nil {
				return errors.Join(s.flushFrames(pt), err)
			}
		}
		pt.buf = appendFrame(pt.buf, r)
		pt.rows++
		pt.next = r.Offset + 1
		if len(pt.buf) >= stageChunk {
			if err := s.flushFrames(pt); err != nil {
				return err
			}
		}
	}
	return s.flushFrames(pt)
}

// flushFrames appends the frames buffered in pt.buf to the staging file,
// creating it if need be. A failed append breaks the partition: what the
// file holds is unknown, and a re-delivery would skip what it lost.
func (s *Sink) flushFrames(pt *part) error {
	if len(pt.buf) == 0 {
		return nil
	}
	if pt.f == nil {
		f, err := s.createStaging(pt.rng.Partition, pt.first)
		if err != nil {
			return err
		}
		pt.f = f
		if pt.lay != nil && s.building.Add(1) <= maxBuilders {
			pt.bld = s.startBuilder(s.bctx, pt.rng.Partition, pt.lay)
		} else if pt.lay != nil {
			s.building.Add(-1)
		}
	}
	if _, err := pt.f.Write(pt.buf); err != nil {
		pt.broken = fmt.Errorf("parquet sink: stage partition %d: %w (the staging file may be incomplete: re-run to resume from what was committed)", pt.rng.Partition, err)
		return pt.broken
	}
	if pt.bld != nil {
		pt.bld.add(pt.buf) // the builder's now
		pt.buf = frameBuf()
	} else {
		pt.buf = pt.buf[:0]
	}
	return nil
}

// createStaging creates the staging file of partition p's object starting
// at first, and its directory.
func (s *Sink) createStaging(p int32, first int64) (*os.File, error) {
	path := s.stagingFile(p, first)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, fmt.Errorf("parquet sink: %w", err)
	}
	return f, nil
}

// closeObject builds and publishes the partition's object [pt.first, end)
// from its staging file, then starts the next object at end.
func (s *Sink) closeObject(ctx context.Context, pt *part, end int64) error {
	sp := span{pt.first, end}
	if err := s.checkOverlap(ctx, pt, sp); err != nil {
		return err
	}
	tmp, info := s.built(pt, sp)
	if tmp == nil {
		var err error
		if tmp, info, err = s.build(ctx, pt.rng.Partition, sp, pt.f); err != nil {
			return err
		}
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := s.publish(ctx, tmp, info); err != nil {
		return err
	}
	s.mu.Lock()
	s.done[info.Name] = info
	s.mu.Unlock()
	pt.chain = append(pt.chain, sp)
	if pt.f != nil {
		pt.f.Close()
		os.Remove(pt.f.Name())
		pt.f = nil
	}
	pt.first, pt.rows = end, 0
	if s.lay == nil {
		pt.lay = nil // the next object's layout is its first decoded value's
	}
	pt.next = max(pt.next, end)
	pt.synced = max(pt.synced, end)
	return nil
}

// built returns the object of span sp its builder built, nil when it has
// none or the builder failed (logged: then the staging file is read
// again).
func (s *Sink) built(pt *part, sp span) (*os.File, objectInfo) {
	b := pt.bld
	if b == nil {
		return nil, objectInfo{}
	}
	pt.bld = nil
	tmp, info, err := b.finish(sp)
	s.building.Add(-1)
	info.Name = ObjectName(s.topic, pt.rng.Partition, sp.first, sp.end)
	if err == nil && info.Rows != pt.rows {
		err = fmt.Errorf("%d rows, the staging file %d", info.Rows, pt.rows)
	}
	if err != nil {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
		s.log.Warn().Err(err).Str("object", info.Name).Msg("parquet sink: building the object while staging failed: building it from the staging file")
		return nil, info
	}
	return tmp, info
}

// Sync fsyncs the partition's staging file: what Write staged is then
// durable.
func (s *Sink) Sync(_ context.Context, partition int32) error {
	pt, err := s.part(partition)
	if err != nil {
		return err
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.broken != nil {
		return pt.broken
	}
	if pt.f != nil {
		if err := pt.f.Sync(); err != nil {
			pt.broken = fmt.Errorf("parquet sink: sync partition %d: %w", partition, err)
			return pt.broken
		}
	}
	pt.synced = pt.next
	return nil
}

// Reconcile implements sinks.Reconciler: a partition whose objects and
// staging end below the group's commit (the staging of another machine,
// or lost) resumes where they end, so that its unfinished object is built
// again from its first offset.
func (s *Sink) Reconcile(_ context.Context, _, _ string, points []sinks.ResumePoint) ([]sinks.Rewind, error) {
	var out []sinks.Rewind
	for _, p := range points {
		pt, err := s.part(p.Partition)
		if err != nil {
			return nil, err
		}
		pt.mu.Lock()
		held := pt.next
		pt.mu.Unlock()
		if held < p.Committed {
			out = append(out, sinks.Rewind{Partition: p.Partition, From: held,
				Reason: fmt.Sprintf("its objects and staging under %s hold the partition up to offset %d", s.st.Where(""), held)})
		}
	}
	return out, nil
}

// Close closes the staging files and releases the staging directory's
// lock; staged records stay for a resume.
func (s *Sink) Close() error {
	s.cancel()
	err := s.closeStaging()
	s.mu.Lock()
	lock := s.lock
	s.lock = nil
	s.mu.Unlock()
	if rerr := lock.Release(); rerr != nil {
		return errors.Join(err, fmt.Errorf("parquet sink: release the lock %s: %w", lock.Path(), rerr))
	}
	return err
}

// closeStaging closes the staging files.
func (s *Sink) closeStaging() error {
	var errs []error
	for _, pt := range s.partitions() {
		pt.mu.Lock()
		if pt.bld != nil {
			pt.bld.discard()
			pt.bld = nil
			s.building.Add(-1)
		}
		if pt.f != nil {
			errs = append(errs, pt.f.Close())
			pt.f = nil
		}
		pt.mu.Unlock()
	}
	return errors.Join(errs...)
}

// partitions returns the run's partitions in order.
func (s *Sink) partitions() []*part {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Values(s.parts), func(a, b *part) int { return int(a.rng.Partition - b.rng.Partition) })
}
