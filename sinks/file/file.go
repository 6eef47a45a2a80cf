package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/replay-tool/replay/internal/flock"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/rs/zerolog"
)

// Sink writes newline-delimited JSON (see AppendJSONL), or CSV with the
// configured columns, to one file or one file per partition, atomically and
// deterministically.
//
// While a run is in progress, records are staged in the directory
// Path+".parts", appended by Write and fsynced by Sync, in one of two layouts:
//
//   - Interleave (one JSONL file, the default of a plan): every partition
//     appends to one staging file, records.jsonl (each partition's lines in
//     offset order); a re-delivered record is dropped, the file already
//     holds its line. Finish publishes the file by a hard link renamed over
//     Path: the output is written to disk once, its line order depending on
//     timing.
//   - Otherwise each partition has its own staging file, partition-N.jsonl,
//     which a re-delivered record truncates back to its offset. Finish
//     concatenates them in partition order into a temporary file renamed
//     over Path (with PerPartition, each JSONL staging file is linked to its
//     own output), so the same window produces byte-identical output.
//
// Readers of Path see the previous file or the complete new one, and a
// resume never duplicates a record.
//
// A CSV file starts with a header row of the column names; fields are
// quoted as RFC 4180 says (encoding/csv), lines end in LF, and NULL (a
// missing header or path, a tombstone's value) is an empty field. Its
// staging lines are JSON holding the record's offset and its CSV row.
//
// One process at a time writes an output: New takes an exclusive flock on
// .NAME.lock next to Path (released by Close or when the process dies) and
// fails at once when another process holds it. Sync creates a partition's
// staging file, empty if need be, so that CheckResume can tell lost
// staging on a resume.
//
// Write, Sync and SyncedPosition are safe for concurrent use.
type Sink struct {
	output
	runID      string
	partitions []int32
	log        zerolog.Logger
	stage      stager
	lock       *flock.Lock // held until Close

	// mu serializes opening, publishing and closing the staging and guards
	// the stager's partition maps and resumed: CheckResume found an
	// unfinished run's staging, which must stay until Finish publishes it.
	mu      sync.Mutex
	resumed bool
}

var _ sinks.Sink = (*Sink)(nil)

// Capabilities: Syncer, Resumer and Positioner; a CSV file with a column of
// the idempotency key writes every record's.
func (s *Sink) Capabilities() sinks.Capabilities {
	c := sinks.Capabilities{Syncer: s, Resumer: s, Positioner: s}
	if e, ok := s.enc.(*csvEncoder); ok && e.keyed {
		c.Keys = sinks.KeysAll
	}
	return c
}

// NewJSONL returns a file sink writing JSONL to path. runID identifies the
// resolved run (plan fingerprint and ranges); staging left by a different
// run is removed.
func NewJSONL(path, runID string) (*Sink, error) {
	return New(Config{Path: path, RunID: runID})
}

// Config configures a file sink.
type Config struct {
	// Path is the output file; with PerPartition, a pattern holding
	// {partition} (PartitionPlaceholder).
	Path string
	// RunID identifies the resolved run: staging left by another is removed.
	RunID string
	// Format is "jsonl" (default) or "csv".
	Format string
	// Columns are the CSV columns (required for csv).
	Columns plan.Columns
	// PerPartition writes one file per partition.
	PerPartition bool
	// Interleave stages every partition of a single JSONL file in one file
	// and publishes it without copying it (see Sink). It does not apply to
	// CSV or PerPartition, whose staging is per partition.
	Interleave bool
	// ValueFormat is how a JSONL file writes values (the plan's
	// value_format); "" is auto. A value it cannot write is a bad record
	// (*record.Error). CSV cells ignore it.
	ValueFormat encode.ValueFormat
	// Overwrite lets the sink replace a file at the output path that
	// replay did not publish (refused otherwise, with sinks.ErrRefused).
	Overwrite bool
	// Partitions are the partitions of the run: with PerPartition and an
	// empty window, Finish publishes an empty file for each.
	Partitions []int32
	// Log receives the sink's notices (staging of another run discarded);
	// default none.
	Log zerolog.Logger
}

// New returns the file sink cfg describes, holding the lock of its
// output until Close.
func New(cfg Config) (*Sink, error) {
	if cfg.Path == "" {
		return nil, errors.New("file sink: empty path")
	}
	if cfg.PerPartition != strings.Contains(cfg.Path, PartitionPlaceholder) {
		return nil, fmt.Errorf("file sink: path %q: one file per partition needs %s in the path, and only it", cfg.Path, PartitionPlaceholder)
	}
	enc, err := newEncoder(cfg)
	if err != nil {
		return nil, err
	}
	s := &Sink{output: output{Path: cfg.Path, perPartition: cfg.PerPartition, enc: enc}, runID: cfg.RunID, partitions: cfg.Partitions, log: cfg.Log}
	parts := stagedParts{&s.mu, s.stagingDir(), map[int32]*filePart{}}
	if cfg.Interleave && !cfg.PerPartition && cfg.Format != "csv" {
		s.stage = &sharedStager{stagedParts: parts, format: cfg.ValueFormat}
	} else {
		s.stage = &partStager{parts, enc}
	}
	if err := checkOutputPath(cfg.Path, cfg.PerPartition); err != nil {
		return nil, err
	}
	if err := checkForeign(cfg, s.stagingDir()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("file sink: path %s: %s is not a directory (a file is in the way): fix the path", cfg.Path, firstNonDir(filepath.Dir(cfg.Path)))
		}
		return nil, fmt.Errorf("file sink: %w", err)
	}
	lock, err := flock.Acquire(s.lockPath())
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("file sink: another replay process is writing %s (lock %s held%s); wait for it or stop it", absPath(cfg.Path), absPath(s.lockPath()), lockHolder(s.lockPath()))
	}
	if err != nil {
		return nil, fmt.Errorf("file sink: lock %s: %w", s.lockPath(), err)
	}
	s.lock = lock
	return s, nil
}

func newEncoder(cfg Config) (encoder, error) {
	switch cfg.Format {
	case "", "jsonl":
		if len(cfg.Columns) > 0 {
			return nil, errors.New("file sink: columns apply to the csv format only")
		}
		return jsonlEncoder{format: cfg.ValueFormat}, nil
	case "csv":
		cols, err := encode.ParseColumns(cfg.Columns, nil, false)
		if err != nil {
			return nil, fmt.Errorf("file sink: %w", err)
		}
		if len(cols) == 0 {
			return nil, errors.New("file sink: a csv file needs columns")
		}
		return &csvEncoder{cols: cols, keyed: encode.UsesKey(cols)}, nil
	default:
		return nil, fmt.Errorf("file sink: format %q: want jsonl or csv", cfg.Format)
	}
}

// Write appends batch, records of one partition in offset order, to the
// partition's staging. The records are durable once Sync for the partition
// returns (Sink is a Syncer). A record the format cannot write (value_format,
// a CSV cell that cannot hold its bytes) returns its *record.Error, and
// nothing of the batch is written.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fp, err := s.part(batch[0].Partition)
	if err != nil {
		return err
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return s.stage.write(fp, batch)
}

// Sync fsyncs the partition's staging file, creating it (empty) when this
// process wrote nothing to the partition, so that CheckResume tells lost
// staging from a partition whose records were all filtered out.
func (s *Sink) Sync(ctx context.Context, partition int32) error {
	fp, err := s.part(partition)
	if err != nil {
		return err
	}
	if err := s.stage.sync(fp, partition); err != nil {
		return err
	}
	return s.checkStaged(partition)
}

// SyncedPosition implements Positioner: the size in bytes of the staging
// file holding partition's records at its last successful Sync (with
// interleave, the one staging file of all partitions). 0 before any.
func (s *Sink) SyncedPosition(partition int32) int64 {
	return s.stage.synced(partition)
}

// Close closes the staging files and releases the output's lock; staged
// output stays for a resume.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.stage.close()
	lock := s.lock
	s.lock = nil
	return errors.Join(err, lock.Release())
}
