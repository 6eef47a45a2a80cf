// Package sqlite is the sink that upserts records into a table of a local
// SQLite database file, one row per idempotency key.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/backoff"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Config configures a SQLite sink.
type Config struct {
	// Mapped: the plan's mapping replaced each record's value
	// (sinks.Options.Mapped). value_bytes keeps the bytes as read.
	Mapped bool
	// Path is the database file, created (with its directory) when missing.
	Path string
	// Table is an SQL name, optionally qualified by a schema ("main.orders").
	// Unquoted parts fold to lower case, "quoted" parts are taken as written.
	Table string
	// OnConflict is "update" (default: the replayed record wins) or "ignore"
	// (the row already stored wins).
	OnConflict string
	// CreateTable creates Table when it is missing: the default layout, or
	// Columns with types that follow their fields.
	CreateTable bool
	// Columns maps the table's columns to record fields; one must hold the
	// idempotency key. Empty means the default layout.
	Columns plan.Columns
	// OnTombstone is what a tombstone does: dbsection.OnTombstoneWrite (""
	// too: a row with NULL value columns), dbsection.OnTombstoneDelete (the
	// key's row is deleted, in order with the batch's upserts) or
	// dbsection.OnTombstoneSkip (nothing is written; counted as ignored).
	OnTombstone string
	// Version names the field that orders a key's updates (plan.ParseField:
	// offset, timestamp, value.<path>, header.<name>), stored in the column
	// replay_version; empty: no guard (see Sink).
	Version string
	// Checkpoints, when its Table is set, records the offset after each
	// batch in that table, in the batch's transaction (see sinks.CheckpointStore).
	Checkpoints sqlcheckpoint.Config
	// BusyTimeout is how long a Write waits for another connection (a second
	// process on the same file) to release the write lock; default 10s.
	BusyTimeout time.Duration
	// OpenTimeout is how long opening the database (switching it to WAL,
	// creating and checking the table) waits for another connection's
	// lock, through SQLite's own busy handler and retries of the open
	// where SQLite returns SQLITE_BUSY without it; default BusyTimeout. A plan
	// gives it sink.retry.max_elapsed, as a locked write is retried.
	OpenTimeout time.Duration
	// DecodedValue and DecodedKey say that the plan decodes values (keys)
	// from the Confluent wire format: the default layout then stores the
	// decoded value in value and adds value_schema_id (the decoded key in
	// kafka_key_json, and key_schema_id); value_bytes and kafka_key keep
	// the bytes. Mapped columns read the decoded value either way.
	DecodedValue, DecodedKey bool
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Sink upserts records into one table of a local database file, one row
// per idempotency key, with the semantics of the postgres sink (column
// mapping and checkpoint table included). The default layout is:
//
//	"key"         TEXT NOT NULL PRIMARY KEY  -- the idempotency key
//	"topic"       TEXT NOT NULL
//	"partition"   INTEGER NOT NULL
//	"offset"      INTEGER NOT NULL
//	"timestamp"   TEXT NOT NULL              -- RFC 3339, UTC, milliseconds
//	"value"       TEXT                       -- the value when it is JSON (UTF-8), else NULL
//	"value_bytes" BLOB                       -- the value's bytes; NULL for a tombstone
//	"kafka_key"   BLOB                       -- the record key's bytes; NULL for a null key
//	"headers"     TEXT NOT NULL              -- JSON array, as the JSONL lines write it
//	"value_schema_id" INTEGER                -- with DecodedValue only: the value's schema id
//	"kafka_key_json"  TEXT                   -- with DecodedKey only: the decoded key
//	"key_schema_id"   INTEGER                -- with DecodedKey only: the key's schema id
//	"replay_version"                         -- with Version only: the record's version
//
// With DecodedValue, value holds the decoded value (record.Note.Decoded).
// value_bytes and kafka_key hold the exact bytes (SQLite keeps a BLOB as
// it is, NUL bytes and all; an empty value is a zero-length BLOB, X”, and
// only a tombstone is NULL: tell them apart with IS NULL, as database/sql
// scans both into a nil []byte). value is the same bytes as TEXT when they
// are one JSON document, for SQLite's JSON functions (value->>'id');
// NULL otherwise. headers is AppendHeadersJSON's array: repeated keys kept
// in record order, a value that is not UTF-8 in base64 with
// "value_encoding":"base64" (DecodeHeaders reads it back). timestamp sorts
// as time does.
//
// A column mapping (Columns) binds each field by the affinity of its
// column in the table: in a BLOB column (declared BLOB or without a type)
// kafka_key, value and header.<name> are the raw bytes; in any other a
// value is its JSON text (a value that is not JSON as a JSON string), and
// bytes that are not UTF-8 are bound as a BLOB of the bytes, which SQLite
// never converts (typeof(col) = 'blob' tells them; a STRICT TEXT column
// refuses them: a bad record). SQLite converts text that
// reads as a number in a column with INTEGER, REAL or NUMERIC affinity;
// text that would not read back the same ("007", "1e3", an integer beyond
// 64 bits, one a REAL would round) is a bad record (*record.Error wrapping
// ErrChanged, naming the column) and is never written changed. A STRICT
// table's refusals are bad records too. create_table makes kafka_key and
// header columns BLOB.
//
// OnTombstone delete deletes the key's row; skip writes nothing. With
// Version, a stored row changes only when the record's version is greater
// than its replay_version (or that is NULL): an equal one is a duplicate,
// a smaller one stale; a tombstone deletes when its version is not smaller
// (or it has none). Versions compare as SQLite compares values: numbers
// numerically, text bytewise, any number before any text.
//
// The sink counts what its committed transactions did (Outcomes):
// inserted, updated, unchanged (a row already holding the same contents),
// ignored (on_conflict: ignore, or a skipped tombstone), deleted, absent,
// stale, duplicate, and the records whose key's row came from another
// topic or partition (a key collision; the default layout and mappings
// with topic and partition columns).
//
// Each Write is committed and durable before it returns, in WAL mode (a
// group commit, see Write): the sink's syncer syncs the WAL file after
// the commit, or the commit itself does (synchronous=FULL) where the sink
// cannot open the WAL file; a second connection checkpoints the WAL into
// the database file. The sink is safe for concurrent use by the
// partitions of a run; other processes may read the file meanwhile, and
// a writer in another process is waited for up to BusyTimeout.
// Re-delivered records overwrite their own rows (update) or leave them
// (ignore), so replaying a window again leaves the same table. Duplicate
// keys in one batch resolve as separate batches would: with update the
// last offset wins, with ignore the first.
type Sink struct {
	db        *sql.DB
	name      string // Table as configured, for messages
	table     string // quoted
	path      string
	cols      []column
	key       int // the key column
	version   int // the replay_version column, -1 without Version
	prov      [3]int
	tombstone string
	ignore    bool
	triggers  bool // the table has triggers: one may skip a row (writeRow)
	stmts     statements
	chunkKeys map[string]struct{} // chunk's scratch (under sem)
	shared    *sharedChunk        // nil: the layout shares nothing in a chunk
	// encoding is the database's text encoding (PRAGMA encoding); utf16:
	// it is not UTF-8, and text that is not UTF-8 is refused (values).
	encoding string
	utf16    bool
	// sharedArgs is insertChunk's scratch (the writer's).
	sharedArgs []any
	ckpt       *sqlcheckpoint.SQLite
	log        zerolog.Logger
	// sem serializes the writer's transactions and ResetCheckpoints (a
	// wait that ends with the caller's context).
	sem chan struct{}
	// reqs hands Writes to the writer goroutine (unbuffered: a request is
	// either taken or, when its context ends first, never seen); quit
	// stops it (Close), and writerDone is closed when it has stopped.
	reqs       chan *writeReq
	quit       chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	// ckptDB is the checkpointer's connection; walKick (capacity 1) wakes
	// it after a commit, and ckptDone is closed when it has stopped.
	ckptDB   *sql.DB
	walKick  chan struct{}
	ckptDone chan struct{}
	// commits counts the writer's commits; copiedThrough is the count a
	// checkpoint pass found all copied, walFrames the WAL's pages after
	// the last pass, and ckptPass (capacity 1) tells of a pass.
	commits, copiedThrough atomic.Uint64
	walFrames              atomic.Int64
	passWhole              atomic.Bool // the last pass copied the whole WAL
	ckptPass               chan struct{}
	restartFrames          int64 // restartCheckpointFrames, but in tests
	// wal is the WAL file the syncer syncs after commits (nil: commits
	// sync it themselves); toSync hands it the committed groups, syncDone
	// is closed when it has stopped, and syncErr fails every later Write.
	wal      *walFile
	toSync   chan []*writeReq
	syncDone chan struct{}
	syncErr  stickyErr
	// created says what this process created empty when it opened the
	// sink (the database file or the table), for CheckResume; "" when both
	// were there. createdTable: create_table created the table.
	created      string
	createdTable bool
	// pos is what the sink reports durable (Positioner).
	pos sqlcheckpoint.Positions
	// rejected: the rows SQLite rejected in the last failed Write of each
	// partition.
	rejected sqlcheckpoint.Rejected

	mu  sync.Mutex
	out sinks.Outcomes
}

// Capabilities declares the checkpoint table, the resume checks of the
// database file and the table (CheckResume, Reconcile, with the durable
// positions they compare), the outcome counts and that it writes every
// record's key.
func (s *Sink) Capabilities() sinks.Capabilities {
	return sinks.Capabilities{Checkpoints: s, Resumer: s, Outcomes: s, Positioner: s, Reconciler: s, Keys: sinks.KeysAll}
}

// Outcomes returns what the committed transactions did since the sink
// was opened.
func (s *Sink) Outcomes() sinks.Outcomes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out
}

// defaultBusyTimeout rides out another process's transaction without
// holding a partition back for long.
const defaultBusyTimeout = 10 * time.Second

// New opens (or creates) the database file, switches it to WAL,
// creates the table when asked, and checks that the table can take the
// upsert (columns and a unique key).
func New(ctx context.Context, cfg Config) (*Sink, error) {
	s := &Sink{name: cfg.Table, path: cfg.Path, version: -1, prov: [3]int{-1, -1, -1}, tombstone: cfg.OnTombstone,
		chunkKeys: make(map[string]struct{}, chunkRows), log: cfg.Log, sem: make(chan struct{}, 1),
		reqs: make(chan *writeReq), quit: make(chan struct{}), writerDone: make(chan struct{}),
		walKick: make(chan struct{}, 1), ckptDone: make(chan struct{}), ckptPass: make(chan struct{}, 1),
		toSync: make(chan []*writeReq, 64), syncDone: make(chan struct{}),
		restartFrames: restartCheckpointFrames}
	if err := s.configure(cfg); err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = defaultBusyTimeout
	}
	dsn, err := sqliteDSN(cfg.Path, cfg.BusyTimeout)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	if s.created, err = checkPath(cfg.Path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: open %s: %w", cfg.Path, err)
	}
	// One connection: writes are serialized anyway.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s.db = db
	open := func() error {
		if cfg.OpenTimeout > cfg.BusyTimeout {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", cfg.OpenTimeout.Milliseconds())); err != nil {
				return fmt.Errorf("sqlite sink: open %s: %w", cfg.Path, err)
			}
			defer db.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", max(cfg.BusyTimeout.Milliseconds(), 1)))
		}
		return s.prepare(ctx, cfg)
	}
	if err := s.openRetrying(ctx, open, max(cfg.OpenTimeout, cfg.BusyTimeout)); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.openCheckpointer(ctx, dsn); err != nil {
		s.stmts.close()
		db.Close()
		return nil, err
	}
	s.openWAL(ctx)
	go s.writer()
	go s.syncer()
	go s.checkpointer()
	s.log.Debug().Str("path", cfg.Path).Str("table", cfg.Table).Bool("ignore", s.ignore).Msg("sqlite sink ready")
	return s, nil
}

// openRetrying runs open until it succeeds, fails otherwise than on a
// locked database, or has failed on one for budget. SQLite's busy handler
// waits out most locks within open; it is skipped where waiting could
// deadlock, as when a connection switching a database in rollback-journal
// mode to WAL finds another connection writing it (several processes
// opening a new database at once), and that SQLITE_BUSY comes back at once.
// The budget runs from the first attempt's start: one that the busy
// handler held for the whole budget is not retried.
func (s *Sink) openRetrying(ctx context.Context, open func() error, budget time.Duration) error {
	r := backoff.Policy{Min: 20 * time.Millisecond, Max: time.Second, Budget: budget}.Start()
	deadline := time.Now().Add(budget)
	for {
		err := open()
		if err == nil || !sinks.Transient(sqliteTransient(err)) {
			return err
		}
		s.stmts.close()
		s.stmts = statements{}
		wait, _, _ := r.Failed() // the budget is the deadline's: from the open's start
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		wait = min(wait, left)
		s.log.Debug().Err(err).Int("attempt", r.Attempts()).Dur("wait", wait).Msg("database locked while opening; retrying")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// configure checks what New needs of cfg and sets the quoted table,
// whether on_conflict is ignore, the column layout (with the key, version
// and provenance columns) and the checkpoint table.
func (s *Sink) configure(cfg Config) (err error) {
	if cfg.Path == "" {
		return errors.New("empty path")
	}
	if s.table, err = encode.QuoteTable(cfg.Table); err != nil {
		return fmt.Errorf("table %q: %w", cfg.Table, err)
	}
	if s.ignore, err = dbsection.Ignore(cfg.OnConflict); err != nil {
		return err
	}
	if s.cols, err = layout(cfg.Columns, cfg.Version, cfg.DecodedValue, cfg.DecodedKey); err != nil {
		return err
	}
	isKey := func(c column) bool { return c.form == formField && c.field.Kind == plan.FieldKey }
	if s.key, err = encode.KeyColumn(s.cols, isKey, func(c column) string { return c.name }); err != nil {
		return err
	}
	if cfg.OnTombstone != "" && !slices.Contains(dbsection.OnTombstones, cfg.OnTombstone) {
		return fmt.Errorf("on_tombstone %q: want %s", cfg.OnTombstone, strings.Join(dbsection.OnTombstones, ", "))
	}
	for i, c := range s.cols {
		if c.form == formVersion {
			s.version = i
		}
		for j, k := range []plan.FieldKind{plan.FieldTopic, plan.FieldPartition, plan.FieldOffset} {
			if c.form == formField && c.field.Kind == k && s.prov[j] < 0 {
				s.prov[j] = i
			}
		}
	}
	if cfg.Checkpoints.Table != "" {
		s.ckpt, err = sqlcheckpoint.NewSQLite(cfg.Checkpoints)
	}
	return err
}

// checkPath refuses a database path that is a directory or not a regular
// file, and creates the directory of a new one. created says, when the
// file does not exist yet, that this run creates it (for a refused
// resume's message); "" otherwise.
func checkPath(path string) (created string, err error) {
	switch fi, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		created = fmt.Sprintf("the database %s did not exist when this run opened it (this run created it, empty)", absPath(path))
	case err == nil && fi.IsDir():
		return "", fmt.Errorf("sqlite sink: path %s is a directory: give the database file's path (e.g. %s)", absPath(path), filepath.Join(path, "replay.db"))
	case err == nil && !fi.Mode().IsRegular():
		return "", fmt.Errorf("sqlite sink: path %s is not a regular file (%s): give a database file's path", absPath(path), fi.Mode().Type())
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("sqlite sink: %w", err)
	}
	return created, nil
}

// openCheckpointer opens the checkpointer's connection, once the file is
// in WAL mode.
func (s *Sink) openCheckpointer(ctx context.Context, dsn string) error {
	ckptDB, err := sql.Open("sqlite", dsn)
	if err == nil {
		ckptDB.SetMaxOpenConns(1)
		ckptDB.SetConnMaxIdleTime(0)
		if err = ckptDB.PingContext(ctx); err != nil {
			ckptDB.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	s.ckptDB = ckptDB
	return nil
}

// openWAL leaves the WAL's sync to the syncer (see syncer) once the sink
// has the WAL file open; a connection the pool would open again gets the
// DSN's synchronous=FULL, which is safe. Without the WAL file, commits
// sync it themselves.
func (s *Sink) openWAL(ctx context.Context) {
	if wal, err := openWAL(s.path); err != nil {
		s.log.Debug().Err(err).Str("path", s.path).Msg("commits sync the WAL themselves")
	} else if _, err := s.db.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		wal.close()
		s.log.Debug().Err(err).Str("path", s.path).Msg("commits sync the WAL themselves")
	} else {
		s.wal = wal
	}
}

// sqliteDSN is the database file as an SQLite URI with the pragmas every
// connection needs: WAL, FULL sync (a commit survives a power loss), a
// busy timeout, BEGIN IMMEDIATE (the write lock up front, not a failed
// upgrade), commits checkpointing only past fallbackCheckpointFrames
// (the checkpointer does it before), and statement journals in memory.
func sqliteDSN(path string, busy time.Duration) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	abs = filepath.ToSlash(abs)
	if !strings.HasPrefix(abs, "/") {
		abs = "/" + abs // a Windows drive: file:/C:/...
	}
	// In a URI, '%', '?' and '#' in the path must be escaped.
	abs = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(%d)&_pragma=temp_store(MEMORY)&_txlock=immediate",
		abs, max(busy.Milliseconds(), 1), fallbackCheckpointFrames), nil
}

// fallbackCheckpointFrames is the WAL size, in pages, past which a commit
// checkpoints itself (wal_autocheckpoint): 32 MiB of 4 KiB pages bounds
// the WAL should the checkpointer fall behind.
const fallbackCheckpointFrames = 8192

// restartCheckpointFrames is the WAL size, in pages, from which the
// writer lets the WAL start over (16 MiB of 4 KiB pages; see
// awaitCheckpoint).
const restartCheckpointFrames = 4096

// restartWait bounds the writer's wait for a checkpoint (awaitCheckpoint).
const restartWait = time.Second

// checkpointer copies committed pages from the WAL into the database file
// (a PASSIVE checkpoint, which never blocks the writer) on its own
// connection after every commit, which would otherwise take a third of
// the writer's time on a bulk load.
func (s *Sink) checkpointer() {
	defer close(s.ckptDone)
	for {
		select {
		case <-s.quit:
			return
		case <-s.walKick:
		}
		gen := s.commits.Load()
		var busy, frames, copied int
		err := s.ckptDB.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		if err != nil { // the commits' own checkpoints and Close's still bound the WAL
			s.log.Debug().Err(err).Str("path", s.path).Msg("background checkpoint failed")
			continue
		}
		s.walFrames.Store(int64(frames))
		s.passWhole.Store(copied == frames)
		if copied == frames {
			s.copiedThrough.Store(gen)
		}
		select {
		case s.ckptPass <- struct{}{}:
		default:
		}
	}
}

// awaitCheckpoint holds the writer, once the WAL has restartCheckpointFrames
// pages, until the checkpointer has copied every commit (at most
// restartWait; not when a reader holds pages back), so that its next
// transaction finds the WAL copied and SQLite starts the WAL over.
func (s *Sink) awaitCheckpoint() {
	if s.walFrames.Load() < s.restartFrames || !s.passWhole.Load() {
		return
	}
	timeout := time.NewTimer(restartWait)
	defer timeout.Stop()
	for s.copiedThrough.Load() < s.commits.Load() {
		select {
		case <-s.ckptPass:
			if !s.passWhole.Load() {
				return // a reader holds pages back: the WAL cannot start over
			}
		case <-timeout.C:
			return
		case <-s.quit:
			return
		}
	}
	s.walFrames.Store(0)
}

// Finish does nothing: every Write is already committed.
func (s *Sink) Finish(context.Context) error { return nil }

// Close stops the sink's writer (a Write it has taken is finished first;
// a Write still waiting returns an error) and closes the database.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	<-s.writerDone
	<-s.syncDone
	<-s.ckptDone
	s.wal.close()
	_ = s.ckptDB.Close() // before db: the last connection's close checkpoints what is left and removes the WAL
	s.stmts.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlite sink: close %s: %w", s.path, err)
	}
	return nil
}

// absPath is path made absolute for a message, or path as it is when the
// working directory is unknown.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
