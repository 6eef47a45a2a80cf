// Package sinks holds the destinations replayed records are written to.
// Every sink is idempotent: writing the same records again (a re-run, or a
// resume after a crash) leaves the same contents as writing them once.
package sinks

import (
	"context"
	"errors"
	"io"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/decode"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
)

// Sink is where replayed records go.
//
// Contract:
//   - Write is synchronous: when it returns nil, every record of batch is
//     durable (fsynced, committed, acknowledged) and the runner may commit the
//     offsets past it to Kafka — or, for a sink that is also a Syncer, durable
//     once Sync returns. When it returns an error, nothing is committed and
//     the records will be delivered again later.
//   - batch holds records of one partition in ascending offset order. It may
//     repeat records written before (re-delivery after a crash or a re-run):
//     the sink must not duplicate them (at-least-once delivery + idempotent
//     writes = effectively once). After a Write of a partition failed, the
//     next Write of that partition starts at or before the failed batch's
//     first offset: a sink may take the offsets it holds as contiguous (the
//     file sink's interleaved staging skips a re-delivered record below the
//     partition's last staged offset).
//   - Write is safe for concurrent use by the goroutines of different
//     partitions; calls for one partition are never concurrent.
//   - The sink must not keep batch or its byte slices after Write returns.
//   - A record the sink cannot take (poison) is reported as *record.Error and
//     nothing of that batch is written past it; the runner decides (on_error)
//     whether to stop or to write the batch again without it.
//   - A failure that may pass by itself (the database restarting, a
//     connection refused or reset, a timeout, HTTP 5xx or 429 once the
//     sink's own retries are spent) must satisfy Transient: wrap it in
//     *TransientError unless Transient recognises it already. The runner
//     retries the same batch with backoff and never skips or dead-letters a
//     record for it. Any other error is permanent: the partition fails,
//     nothing past the last durable write is committed.
type Sink interface {
	Write(ctx context.Context, batch []record.Record) error
	// Finish is called once every partition of the run reached its end
	// offset; a sink that stages output publishes it here. It is idempotent:
	// calling it again after a crash publishes the same output.
	Finish(ctx context.Context) error
	// Close releases resources. It does not publish staged output.
	Close() error
	// Capabilities declares what the sink offers beyond these methods.
	Capabilities() Capabilities
}

// Capabilities is what a sink offers beyond Write, Finish and Close: the
// runner reads it instead of probing for optional interfaces. A nil field
// is a capability the sink lacks. A wrapping sink declares what the
// wrapper itself provides, never more.
type Capabilities struct {
	// RetriesItself is set for a sink that retries transient failures by
	// the policy of its plan section (the http sink: max_retries,
	// max_retry_wait). The runner then makes one try per write, without
	// its own time limit (runner Options.FlushTimeout), and does not retry
	// it: a transient error it returns has already been retried.
	RetriesItself bool
	// Syncer makes written records durable (Write alone does not).
	Syncer Syncer
	// Resumer checks, before a resumed run, that the sink still holds the
	// output of the earlier run.
	Resumer Resumer
	// Positioner says how much of a partition's output is durable.
	Positioner Positioner
	// Reconciler tells, on a resume, where the sink's output of each
	// partition really ends, when that can be below the group's commit.
	Reconciler Reconciler
	// Checkpoints stores checkpoints in the sink's own transactions.
	Checkpoints CheckpointStore
	// Offsets is set for a sink whose transactions commit the replay
	// group's offsets on the cluster the runner commits to: the runner
	// then commits through it only (a standalone commit made late, after
	// another process fenced this one, could move the offset back).
	Offsets OffsetCommitter
	// Outcomes is set for a sink that counts what its durable writes did to
	// the rows they touched (the database sinks), for the summary, the
	// report and the metrics.
	Outcomes OutcomeCounter
	// Keys says which records' idempotency keys the sink writes: the
	// runner renders the key template (record.Record.IdemKey) for those
	// only.
	Keys KeyUse
}

// KeyUse says which records' idempotency keys a sink writes (a key
// column, a header, a field of the request).
type KeyUse uint8

const (
	// KeysUnused: the sink writes no key.
	KeysUnused KeyUse = iota
	// KeysAll: the sink writes every record's key.
	KeysAll
	// KeysButTombstones: the sink writes the key of every record but
	// tombstones, which it skips (on_tombstone: skip).
	KeysButTombstones
)

// Needs reports whether a sink writing u keys writes r's.
func (u KeyUse) Needs(r *record.Record) bool {
	return u == KeysAll || u == KeysButTombstones && r.Value != nil
}

// Outcomes counts what a sink's durable writes did with their records, as
// the sink's store reported it. A re-delivered record is counted again, as
// what its write did that time; a transaction rolled back counts nothing.
type Outcomes struct {
	// Inserted records created a row; Updated changed a stored row.
	Inserted int64 `json:"inserted"`
	Updated  int64 `json:"updated"`
	// Unchanged records met a row already holding the same contents (a
	// re-run, a re-delivery): nothing was written.
	Unchanged int64 `json:"unchanged"`
	// Ignored records met a stored row that the sink keeps by the plan's
	// choice (on_conflict: ignore), whatever its contents.
	Ignored int64 `json:"ignored"`
	// Deleted tombstones removed a row (on_tombstone: delete); Absent
	// tombstones found no row to remove.
	Deleted int64 `json:"deleted"`
	Absent  int64 `json:"absent,omitempty"`
	// Stale records carried a smaller version than the stored row's and
	// Duplicate an equal one (sink.version): the row was left unchanged.
	Stale     int64 `json:"stale,omitempty"`
	Duplicate int64 `json:"duplicate,omitempty"`
	// Collisions counts records whose idempotency key another source
	// record of the run produced before (both wrote one row); FirstCollision
	// names the first such pair ("topic/partition/offset and
	// topic/partition/offset: key K"), "" when none.
	Collisions     int64  `json:"key_collisions,omitempty"`
	FirstCollision string `json:"first_key_collision,omitempty"`
}

// Add adds o's counts to the receiver's (FirstCollision: the receiver's
// when it has one).
func (s *Outcomes) Add(o Outcomes) {
	s.Inserted += o.Inserted
	s.Updated += o.Updated
	s.Unchanged += o.Unchanged
	s.Ignored += o.Ignored
	s.Deleted += o.Deleted
	s.Absent += o.Absent
	s.Stale += o.Stale
	s.Duplicate += o.Duplicate
	s.Collisions += o.Collisions
	if s.FirstCollision == "" {
		s.FirstCollision = o.FirstCollision
	}
}

// OutcomeCounter is implemented by a sink that counts its Outcomes.
// Outcomes returns the counts since the sink was opened; it is safe for
// concurrent use with Write.
type OutcomeCounter interface {
	Outcomes() Outcomes
}

// OffsetCommitter is implemented by a sink whose transactions commit the
// replay group's offsets (the exactly-once kafka sink on the source
// cluster). CommitOffset commits next as partition's offset in a fenced
// transaction of the sink's, unless its transactions committed next or
// more already: an advance past records that produced nothing. It returns
// the sink's typed error when fenced, and is called by partition's
// goroutine only.
type OffsetCommitter interface {
	CommitOffset(ctx context.Context, partition int32, next int64) error
}

// CapabilitiesOf returns s.Capabilities(), or none for a nil sink (no
// dead-letter sink configured).
func CapabilitiesOf(s Sink) Capabilities {
	if s == nil {
		return Capabilities{}
	}
	return s.Capabilities()
}

// Syncer is implemented by a sink whose Write does not force records to
// stable storage (the file sink appends without fsync): they are durable
// once Sync for their partition returned nil. The runner calls Sync before
// every commit. Sync is safe for concurrent use by different partitions.
type Syncer interface {
	Sync(ctx context.Context, partition int32) error
}

// Resumer is implemented by a sink whose earlier output may be missing when
// a run resumes (files found through a relative path, staging someone
// deleted, a database file created afresh): resuming would publish a
// partial output.
//
// Before a resumed run commits or writes anything, the runner calls
// CheckResume once with every partition of the run. For each partition
// with Committed > Start the sink must hold the records of
// [Start, Committed): in staging, or published when every partition is
// finished. Else CheckResume returns an error saying what is missing,
// where (absolute paths) and how to fix it (restore the files or run from
// the first run's working directory, or replay the window from its start),
// and the runner refuses the run (exit 3) and changes nothing.
//
// A Resumer that is also a Syncer leaves the trace CheckResume looks for
// by the time Sync for a partition returns, even when nothing was written
// to the partition.
type Resumer interface {
	CheckResume(parts []ResumePoint) error
}

// ResumePoint is one partition of a resumed run: its range [Start, End)
// and the offset the replay group holds for it (everything below was made
// durable by the sink of an earlier process).
type ResumePoint struct {
	Partition             int32
	Start, Committed, End int64
	// Position is what the sink's Positioner said was durable for the
	// partition when Committed was committed (0: unknown, a commit of an
	// earlier version or of another sink).
	Position int64
}

// Positioner is implemented by a sink that can say how much of a
// partition's output its durable writes hold: the file sink, the bytes of
// the staging file its last Sync made durable; the database sinks, the
// offset after the last batch they committed. The runner stores it with
// each commit and passes it back in ResumePoint.Position, so that
// CheckResume and Reconcile notice output emptied or truncated since. 0 is
// nothing known. SyncedPosition is safe for concurrent use with Write and
// Sync; a Reconciler also reports, before the first write of a resumed
// partition, the position its commit recorded (or its Rewind's).
type Positioner interface {
	SyncedPosition(partition int32) int64
}

// Reconciler is implemented by a sink whose durable output can fall
// behind the replay group's commits between two processes (the database
// sinks: a table truncated, restored from a backup, a lagging replica).
//
// Before a resumed run commits or writes anything (after CheckResume), the
// runner calls Reconcile once with the replay group, the topic and every
// partition of the run. It returns a Rewind for each partition whose
// output the sink no longer holds up to Committed, From being where it
// ends now (the offset after its checkpoint, or Start), with the sink's
// own state (a checkpoint table) made consistent with From. The runner
// resumes each such partition at From and commits that. An error is a
// failure to tell: the runner fails the run and changes nothing.
type Reconciler interface {
	Reconcile(ctx context.Context, group, topic string, parts []ResumePoint) ([]Rewind, error)
}

// Rewind is a partition whose output a sink no longer holds up to the
// group's commit (Reconciler): resume it at From, with Position the sink's
// durable position there (0 at the range start), and Reason, saying what
// the sink found, for the log.
type Rewind struct {
	Partition int32
	From      int64
	Position  int64
	Reason    string
}

// CheckpointStore is implemented by a sink that records, in the
// transaction of each Write, the offset after the batch for its partition
// (the database sinks with a checkpoint table): the runner resumes each
// partition from the later of the Kafka commit and the checkpoint.
//
// Checkpoints are kept per group, topic and partition with the plan
// fingerprint and the run identity (Options.RunID). Checkpoints returns
// those of the sink's own run only; within a run a checkpoint never moves
// back. Both methods are safe for concurrent use with Write.
type CheckpointStore interface {
	Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error)
	// ResetCheckpoints forgets group's checkpoints of topic: a fresh run
	// (a new resolution, or a restart) must not resume from an earlier
	// run's, which may have the same identity.
	ResetCheckpoints(ctx context.Context, group, topic string) error
}

// SchemaColumn is one column of a decoded value's schema: the top-level
// field's name and the type its rendered JSON converts to exactly (string,
// base64, int32, int64, uint64, boolean, float, double, decimal(P,S),
// date, time_millis, time_micros, timestamp_millis, timestamp_micros).
type SchemaColumn = decode.Column

// Options carries what every sink may need besides its plan section.
type Options struct {
	// ValueColumns returns the columns of the schema of value, a record's
	// value in the Confluent wire format that the decode stage decoded:
	// one per top-level field, typed (decode.Column); nil when the plan
	// decodes no value. It returns the same slice for the same schema (a
	// sink may recognise a schema by it). A sink laying out its output
	// from the value's schema (the parquet sink without columns) calls it.
	ValueColumns func(ctx context.Context, value []byte) ([]SchemaColumn, error)
	// Log receives the sink's diagnostics; default zerolog.Nop().
	Log zerolog.Logger
	// PlanName is recorded as provenance where the sink has room for it.
	PlanName string
	// RunID identifies the resolved run (plan fingerprint and offset ranges):
	// a sink that stages output discards staging left by another run, a
	// checkpoint table reads back only this run's checkpoints.
	RunID string
	// Group is the plan's replay consumer group and Fingerprint the plan's
	// fingerprint: a checkpoint table records them with each checkpoint.
	Group, Fingerprint string
	// Topic is the source topic and Partitions are the source partitions of
	// the run (its resolved ranges): the exactly-once kafka sink commits
	// the group's offsets for them, and opens one transactional producer
	// per partition.
	Topic      string
	Partitions []int32
	// Ranges are the run's resolved ranges, one per partition of
	// Partitions: a sink that names its output after them (the parquet
	// sink's objects) reads them here. nil when unknown.
	Ranges []Range
	// CommitMetadata returns the commit metadata the runner writes with the
	// group's offset for a partition of the run (plan, fingerprint, range):
	// a sink committing offsets to the group itself writes the same; nil
	// when unknown.
	CommitMetadata func(partition int32) string
	// SourceClusterID is the id of the source cluster (Metadata's
	// ClusterID), where the runner commits the replay group's offsets; ""
	// when unknown. A sink committing the group's offsets itself declares
	// Capabilities.Offsets only on that cluster.
	SourceClusterID string
	// Member is set when the process runs as one member of the replay
	// group (run --join): it returns the member's current generation and
	// member id (-1 and "" between generations). A sink committing the
	// group's offsets itself commits as that member (TxnOffsetCommit v3+,
	// KIP-447) and fails a Write or CommitOffset of a partition the member
	// lost with an error wrapping ErrPartitionLost.
	Member func() (generation int32, memberID string)
	// Stdout is where a sink that writes to standard output writes (the
	// command's own stdout); nil means os.Stdout.
	Stdout io.Writer
	// DeadLetter is set when the sink is a plan's dead-letter sink: a sink
	// that can order its output keeps it in partition order, so that a
	// re-delivered partition is rewritten rather than skipped.
	DeadLetter bool
	// Mapped is set when the plan's mapping changes the values the sink
	// gets: Record.Value is the mapped value, Record.OriginalValue the
	// bytes as read, which a sink that keeps a record's exact bytes (a
	// database's value_bytes) writes.
	Mapped bool
	// DecodedValue and DecodedKey are set when the plan decodes values
	// (keys) from the Confluent wire format (plan decode:): a sink whose
	// layout has room for it stores the decoded JSON and its schema id
	// (record.Note.Decoded) besides the record's bytes.
	DecodedValue, DecodedKey bool
}

// Opened returns a driver's new sink s as a Sink (its Open's result): nil
// with err, never a typed nil pointer.
func Opened[S Sink](s S, err error) (Sink, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Range is one partition's resolved range of a run: the offsets
// [Start, End).
type Range struct {
	Partition  int32
	Start, End int64
}

// ErrPartitionLost is wrapped by the error of a sink's Write or
// CommitOffset of a partition that another member of the replay group owns
// now (run --join: a rebalance moved it): nothing of the call is kept, and
// the new owner resumes from the group's last commit.
var ErrPartitionLost = errors.New("another member of the replay group owns the partition now")

// ErrRefused is wrapped by the error of a sink that refuses to start
// because it would destroy something it did not write (a file at the
// output path that replay did not publish): the run changes nothing and
// exits as refused for safety.
var ErrRefused = errors.New("refused for safety")

// Refusal returns a sink's refusal to start, saying why (msg): an error
// that is ErrRefused (errors.Is) and reads as msg alone, since the command
// line already prefixes a refusal with "refused:".
func Refusal(msg string) error { return refusal(msg) }

type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == ErrRefused }

// ErrLost is wrapped by the error of a sink that finds output it had made
// durable gone during the run (the file sink's staging deleted or cut
// short): the records below the group's commits are no longer all in the
// sink, and resuming cannot bring them back. Nothing more is committed or
// published; the run is refused (exit 3) with a hint to replay the window
// from its start.
var ErrLost = errors.New("the sink lost records it had made durable")

// ErrFenced is wrapped by a Write that another process of the same plan
// fenced (a transactional producer with the same transactional id,
// KIP-98): that process runs now, and this one must stop without a retry.
var ErrFenced = errors.New("another process of this plan took over")

// Spec is what a driver builds a sink from (each driver's Open): the
// validated plan section and the run's options. The records it is given
// carry their idempotency keys (record.Record.IdemKey).
type Spec struct {
	// Plan is the sink's section of a plan validated by package plan.
	Plan plan.Sink
	// Options are the run's (logger, plan name, run identity, group).
	Options Options
}

// ConnectionsField describes connections, the field of the sinks that
// write through several connections at once (postgres, http).
var ConnectionsField = plan.FieldDescriptor{Name: "connections",
	Doc: "postgres and http: connections written through at once, 1..64 (default 1); records are sharded by idempotency key (a key always goes through one connection, in order), and a commit covers only what every connection made durable."}

// MaxConnections bounds a sink's connections.
const MaxConnections = 64

// CheckConnections checks n, the connections of the section c checks:
// unset is 1.
func CheckConnections(c *plan.SinkCheck, n int) {
	if c.Present("connections") && (n < 1 || n > MaxConnections) {
		c.Add("connections", "%d: want 1..%d connections", n, MaxConnections)
	}
}

// DeadLetter returns r marked as a dead letter: a record that could not be
// processed, and why. Written to a dead-letter sink it keeps its key,
// value, headers and coordinates (so a re-delivered dead letter overwrites
// itself, as any record does) and carries the reason: AppendJSONL adds the
// fields error, source_topic, source_partition and source_offset; other
// sinks get them as headers (WithDeadLetterHeaders).
func DeadLetter(r record.Record, reason string) record.Record { return record.DeadLetter(r, reason) }

// HeaderError carries a dead letter's reason in a sink without JSON lines
// (kafka, postgres, sqlite, http), after the record's own headers; the
// source coordinates are the record's own (the kafka sink adds them as
// provenance headers, the database sinks store them in columns).
const HeaderError = "replay-error"

// WithDeadLetterHeaders wraps s, a sink that knows nothing of dead
// letters, so that each record it writes carries its dead-letter reason as
// the header HeaderError after its own headers (a column maps it as
// header.replay-error). The wrapper declares s's capabilities less its
// checkpoint table.
func WithDeadLetterHeaders(s Sink) Sink { return &headerDeadLetters{Sink: s} }

type headerDeadLetters struct{ Sink }

func (s *headerDeadLetters) Write(ctx context.Context, batch []record.Record) error {
	out := make([]record.Record, 0, len(batch))
	for _, r := range batch {
		hs := make([]record.Header, len(r.Headers), len(r.Headers)+1)
		copy(hs, r.Headers)
		r.Headers = append(hs, record.Header{Key: HeaderError, Value: []byte(r.DeadLetterReason())})
		out = append(out, r)
	}
	return s.Sink.Write(ctx, out)
}

// Capabilities are the wrapped sink's but for its checkpoint table: the
// runner keeps checkpoints in the main sink only.
func (s *headerDeadLetters) Capabilities() Capabilities {
	c := s.Sink.Capabilities()
	c.Checkpoints = nil
	return c
}
