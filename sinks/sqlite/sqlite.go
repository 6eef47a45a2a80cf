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
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Config configures a SQLite sink.
type Config struct {
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
	// Checkpoints, when its Table is set, records the offset after each
	// batch in that table, in the batch's transaction (see sinks.CheckpointStore).
	Checkpoints sqlcheckpoint.Config
	// BusyTimeout is how long a Write waits for another connection (a second
	// process on the same file) to release the write lock; default 10s.
	BusyTimeout time.Duration
	// Keyer computes the key column; nil means DefaultKey.
	Keyer *sinks.Keyer
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Sink upserts records into one table of a local database file, one row
// per idempotency key, with the semantics of the postgres sink (column
// mapping and checkpoint table included). The default layout is:
//
//	"key" text primary key, "topic" text, "partition" integer,
//	"offset" integer, "timestamp" text, "value" text, "headers" text
//
// timestamp is RFC 3339 in UTC with milliseconds (2026-11-03T10:00:00.123Z,
// so text order is time order); value is the record value when it is valid
// JSON (invalid UTF-8 replaced by U+FFFD), else the value as a JSON string,
// NULL for a tombstone; headers is a JSON array of {"key","value"} in record
// order. SQLite's JSON functions read both columns.
//
// Each Write is one transaction, committed (and fsynced: WAL journal,
// synchronous=FULL) before it returns. Writes are serialized inside the
// sink, so it is safe for concurrent use by the partitions of a run; other
// processes may read the file meanwhile (WAL), and a writer in another
// process is waited for up to BusyTimeout. Re-delivered records
// overwrite their own rows (update) or leave them (ignore), so replaying a
// window again leaves the same table. Duplicate keys in one batch resolve
// as separate batches would: with update the last offset wins, with ignore
// the first.
type Sink struct {
	db     *sql.DB
	name   string // Table as configured, for messages
	path   string
	keyer  *sinks.Keyer
	cols   []encode.Column
	upsert string
	ckpt   *sqlcheckpoint.SQLite
	log    zerolog.Logger
	// sem serializes Writes: SQLite has one writer at a time, and waiting
	// here (unlike on a mutex) ends when the caller's context does.
	sem chan struct{}
	// created says what this process created empty when it opened the
	// sink: the database file, or (create_table) the table; "" when both
	// were there. A resumed run refuses to go on then (CheckResume).
	created string
}

var (
	_ sinks.Sink            = (*Sink)(nil)
	_ sinks.CheckpointStore = (*Sink)(nil)
	_ sinks.Resumer         = (*Sink)(nil)
)

// Capabilities declares the checkpoint table and the resume check of the
// database file.
func (s *Sink) Capabilities() sinks.Capabilities {
	return sinks.Capabilities{Checkpoints: s, Resumer: s}
}

// defaultBusyTimeout rides out another process's transaction without
// holding a partition back for long.
const defaultBusyTimeout = 10 * time.Second

// New opens (or creates) the database file, switches it to WAL,
// creates the table when asked, and checks that the table can take the
// upsert (columns and a unique key).
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite sink: empty path")
	}
	table, err := encode.QuoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: table %q: %w", cfg.Table, err)
	}
	var ignore bool
	switch cfg.OnConflict {
	case "", "update":
	case "ignore":
		ignore = true
	default:
		return nil, fmt.Errorf("sqlite sink: on_conflict %q: want update or ignore", cfg.OnConflict)
	}
	cols, err := encode.ParseColumns(cfg.Columns, encode.DefaultColumns(), true)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	key, err := encode.KeyColumn(cols)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	var ckpt *sqlcheckpoint.SQLite
	if cfg.Checkpoints.Table != "" {
		if ckpt, err = sqlcheckpoint.NewSQLite(cfg.Checkpoints); err != nil {
			return nil, fmt.Errorf("sqlite sink: %w", err)
		}
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = defaultBusyTimeout
	}
	dsn, err := sqliteDSN(cfg.Path, cfg.BusyTimeout)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	var created string
	if _, err := os.Stat(cfg.Path); errors.Is(err, os.ErrNotExist) {
		created = fmt.Sprintf("the database %s did not exist when this run opened it (this run created it, empty)", absPath(cfg.Path))
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite sink: %w", err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: open %s: %w", cfg.Path, err)
	}
	// One connection: writes are serialized anyway, and the pragmas of the
	// DSN then hold for every statement.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s := &Sink{db: db, name: cfg.Table, path: cfg.Path, keyer: cfg.Keyer, cols: cols, upsert: sqliteUpsertSQL(table, cols, key, ignore),
		ckpt: ckpt, log: cfg.Log, sem: make(chan struct{}, 1), created: created}
	if err := s.prepare(ctx, table, sqliteCreateTableSQL(table, cols, key), cfg.CreateTable); err != nil {
		db.Close()
		return nil, err
	}
	s.log.Debug().Str("path", cfg.Path).Str("table", cfg.Table).Bool("ignore", ignore).Msg("sqlite sink ready")
	return s, nil
}

// sqliteDSN is the database file as an SQLite URI with the pragmas every
// connection needs: WAL (readers do not block the writer), FULL sync (a
// committed transaction survives a power loss, which NORMAL does not
// promise in WAL mode), a busy timeout, and BEGIN IMMEDIATE so that a
// transaction takes the write lock up front instead of failing to upgrade.
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
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		abs, max(busy.Milliseconds(), 1)), nil
}

// Finish does nothing: every Write is already committed.
func (s *Sink) Finish(context.Context) error { return nil }

// Close closes the database.
func (s *Sink) Close() error {
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
