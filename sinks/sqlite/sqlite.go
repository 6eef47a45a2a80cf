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
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/replay-tool/replay/internal/record"
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

func (s *Sink) prepare(ctx context.Context, table, createSQL string, create bool) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite sink: open %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite sink: open %s: the database is in %s journal mode and cannot switch to WAL (is it on a network file system?)", s.path, mode)
	}
	if create {
		if s.created == "" {
			// Whether the table is there before CREATE TABLE IF NOT EXISTS.
			if stmt, err := s.db.PrepareContext(ctx, "SELECT 1 FROM "+table+" LIMIT 0"); err != nil {
				s.created = fmt.Sprintf("the table %s did not exist in the database %s when this run opened it (create_table created it, empty)", s.name, absPath(s.path))
			} else if err := stmt.Close(); err != nil {
				return err
			}
		}
		if _, err := s.db.ExecContext(ctx, createSQL); err != nil {
			return fmt.Errorf("sqlite sink: create table %s: %w", s.name, err)
		}
	}
	// Preparing the upsert resolves the table, its columns and the ON
	// CONFLICT target (which needs a unique key on "key").
	stmt, err := s.db.PrepareContext(ctx, s.upsert)
	if err != nil {
		return fmt.Errorf("sqlite sink: check table %s: %w", s.name, err)
	}
	if err := stmt.Close(); err != nil {
		return err
	}
	if s.ckpt != nil {
		if err := s.ckpt.Prepare(ctx, s.db); err != nil {
			return fmt.Errorf("sqlite sink: checkpoint table %s: %w", s.ckpt.Name, err)
		}
	}
	return nil
}

// sqliteCreateTableSQL creates the table with a column per field: INTEGER
// for partition and offset, TEXT for the others (JSON and timestamps
// included); the key column is the primary key. For the default layout it
// is the DDL of the first versions.
func sqliteCreateTableSQL(table string, cols []encode.Column, key int) string {
	var b strings.Builder
	b.WriteString(`CREATE TABLE IF NOT EXISTS ` + table + ` (`)
	for i, c := range cols {
		if i > 0 {
			b.WriteString(",")
		}
		typ := "TEXT"
		if c.Field.Kind == plan.FieldPartition || c.Field.Kind == plan.FieldOffset {
			typ = "INTEGER"
		}
		b.WriteString("\n\t" + encode.QuoteIdent(c.Name) + " " + typ)
		switch {
		case i == key:
			b.WriteString(" NOT NULL PRIMARY KEY")
		case c.NotNull():
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString("\n)")
	return b.String()
}

// sqliteUpsertSQL upserts one row. Rows are upserted in offset order, so
// duplicate keys in a batch resolve as separate batches would. An update
// that would change nothing is skipped, so a re-delivery does not rewrite
// identical rows.
func sqliteUpsertSQL(table string, cols []encode.Column, key int, ignore bool) string {
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	var set, old, new []string
	for i, c := range cols {
		names[i], marks[i] = encode.QuoteIdent(c.Name), "?"
		if i != key {
			set = append(set, names[i]+" = excluded."+names[i])
			old = append(old, names[i])
			new = append(new, "excluded."+names[i])
		}
	}
	q := `INSERT INTO ` + table + ` (` + strings.Join(names, ", ") + `)
VALUES (` + strings.Join(marks, ", ") + `)
ON CONFLICT (` + names[key] + `) DO `
	if ignore || len(set) == 0 {
		return q + `NOTHING`
	}
	return q + `UPDATE SET ` + strings.Join(set, ", ") + `
WHERE (` + strings.Join(old, ", ") + `)
	IS NOT (` + strings.Join(new, ", ") + `)`
}

// sqliteRow is one row of the upsert.
type sqliteRow struct {
	rec  *record.Record
	args []any
}

// Write upserts batch in one transaction. A key template failing on a
// record returns its *record.Error and writes nothing; so does a row the
// database rejects (a constraint of a table made by hand, a value too big).
// Any other failure is a plain error, and nothing is written.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, err)
	}
	rows, err := s.rows(batch)
	if err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, ctx.Err())
	}
	if err := s.upsertRows(ctx, rows, batch); err != nil {
		return err
	}
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows)).Msg("upserted")
	return nil
}

func (s *Sink) rows(batch []record.Record) ([]sqliteRow, error) {
	rows := make([]sqliteRow, len(batch))
	for i := range batch {
		r := &batch[i]
		key, err := s.keyer.Key(r)
		if err != nil {
			return nil, err
		}
		rows[i] = sqliteRow{rec: r, args: s.values(r, key)}
	}
	return rows, nil
}

// values are r's column values: integers for partition and offset, text
// for the others (timestamps as RFC 3339 in UTC with milliseconds, which
// sorts as time does), nil for NULL.
func (s *Sink) values(r *record.Record, key string) []any {
	cs := encode.Cells{Record: r, Key: key}
	out := make([]any, len(s.cols))
	for i, c := range s.cols {
		switch c.Field.Kind {
		case plan.FieldPartition:
			out[i] = int64(r.Partition)
		case plan.FieldOffset:
			out[i] = r.Offset
		default:
			if v, ok := cs.Text(c); ok {
				out[i] = v
			}
		}
	}
	return out
}

func (s *Sink) upsertRows(ctx context.Context, rows []sqliteRow, batch []record.Record) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, s.upsert)
	if err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	defer stmt.Close()
	for i := range rows {
		if _, err := stmt.ExecContext(ctx, rows[i].args...); err != nil {
			err = fmt.Errorf("sqlite sink: upsert into %s: %w", s.name, s.ctxErr(ctx, err))
			if sqliteRejectsData(err) {
				return record.NewError(rows[i].rec, err)
			}
			return sqliteTransient(err)
		}
	}
	if s.ckpt != nil {
		if err := s.ckpt.Write(ctx, tx, batch); err != nil {
			return sqliteTransient(fmt.Errorf("sqlite sink: checkpoint in %s: %w", s.ckpt.Name, s.ctxErr(ctx, err)))
		}
	}
	if err := tx.Commit(); err != nil {
		return sqliteTransient(fmt.Errorf("sqlite sink: commit to %s: %w", s.name, s.ctxErr(ctx, err)))
	}
	return nil
}

// sqliteTransient marks err as a *TransientError when the database was
// locked by another connection for longer than the busy timeout.
func sqliteTransient(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &sinks.TransientError{Err: err}
		}
	}
	return err
}

// ctxErr returns the context's error when the context ended (the driver
// reports an interrupted statement in its own words), else err.
func (s *Sink) ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// sqliteRejectsData reports whether err is SQLite refusing the data of one
// row: a constraint other than the key (a NOT NULL or CHECK of a table made
// by hand), a value too big, or a datatype mismatch (a STRICT table).
func sqliteRejectsData(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
		return true
	}
	return false
}

// ResumeError is a SQLite sink's refusal to resume (CheckResume): the
// replay group records Partition as replayed up to offset Committed, but
// the database file or the table did not exist when this process opened
// the sink, so the table lacks the rows written before that offset.
type ResumeError struct {
	// Partition, Committed, Start and End are the first partition replayed
	// past its start: its committed offset and its range [Start, End).
	Partition             int32
	Committed, Start, End int64
	// Missing says what did not exist, naming the database's absolute path.
	Missing string
}

// Error says what is missing and the ways out: run from the first run's
// working directory, restore the database, or replay the window from its
// start (the caller words how: the runner's refusal carries a restart
// hint).
func (e *ResumeError) Error() string {
	return fmt.Sprintf("sqlite sink: the replay group records partition %d as replayed up to offset %d (its range is [%d, %d)), but %s: "+
		"the table would lack the rows written before that offset. Run replay from the working directory of the first run "+
		"(a relative database path is resolved against it) or restore the database; or replay the window again from its start",
		e.Partition, e.Committed, e.Start, e.End, e.Missing)
}

var _ error = (*ResumeError)(nil)

// CheckResume implements Resumer: the rows of a partition replayed past its
// start by an earlier process are in the database, unless the database file
// or the table did not exist when this process opened the sink (a relative
// path resolved against another working directory than the first run's, a
// database or table deleted since). Rows are not counted: a mapped table
// need not have a partition or offset column, and rows of other runs may
// share it. It returns a *ResumeError then.
func (s *Sink) CheckResume(points []sinks.ResumePoint) error {
	if s.created == "" {
		return nil
	}
	for _, p := range points {
		if p.Committed > p.Start {
			return &ResumeError{Partition: p.Partition, Committed: p.Committed, Start: p.Start, End: p.End, Missing: s.created}
		}
	}
	return nil
}

// Finish does nothing: every Write is already committed.
func (s *Sink) Finish(context.Context) error { return nil }

// Checkpoints returns the offsets the sink's checkpoint table holds for
// group and topic, written by this run (sqlcheckpoint.Config.RunID); none
// without a checkpoint table.
func (s *Sink) Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if s.ckpt == nil {
		return nil, nil
	}
	out, err := s.ckpt.Read(ctx, s.db, group, topic)
	if err != nil {
		return nil, fmt.Errorf("sqlite sink: read checkpoints from %s: %w", s.ckpt.Name, err)
	}
	return out, nil
}

// ResetCheckpoints deletes the checkpoints of group and topic.
func (s *Sink) ResetCheckpoints(ctx context.Context, group, topic string) error {
	if s.ckpt == nil {
		return nil
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return fmt.Errorf("sqlite sink: reset checkpoints in %s: %w", s.ckpt.Name, ctx.Err())
	}
	if _, err := s.db.ExecContext(ctx, s.ckpt.Reset, group, topic); err != nil {
		return fmt.Errorf("sqlite sink: reset checkpoints in %s: %w", s.ckpt.Name, err)
	}
	return nil
}

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
