// Package postgres is the sink that upserts records into a PostgreSQL
// table, one row per idempotency key.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Config configures a PostgreSQL sink.
type Config struct {
	// DSN is a libpq connection string, URL or key=value. Its password never
	// appears in errors or logs.
	DSN string
	// Table is an SQL name, optionally schema-qualified: unquoted parts fold
	// to lower case as in SQL, "quoted" parts are taken as written.
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
	// CopyThreshold: a batch of more rows than this is loaded with COPY
	// into a temporary table, then upserted from it; smaller batches are
	// one statement over arrays. 0 means plan.DefaultCopyThreshold.
	CopyThreshold int
	// Checkpoints, when its Table is set, records the offset after each
	// batch in that table, in the batch's transaction (see sinks.CheckpointStore).
	Checkpoints sqlcheckpoint.Config
	// Keyer computes the key column; nil means DefaultKey.
	Keyer *sinks.Keyer
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Sink upserts records into one table, one row per idempotency key.
// Without a column mapping the table has the default layout:
//
//	key text primary key, topic text not null, partition int not null,
//	"offset" bigint not null, "timestamp" timestamptz not null,
//	value jsonb, headers jsonb not null
//
// value is the record value when it is valid JSON (invalid UTF-8 in it
// replaced by U+FFFD), else the value as a JSON string, NULL for a
// tombstone; headers is a JSON array of {"key","value"} in record order.
// With a mapping, each column holds the field it names (see cells.text),
// converted to the column's type, and the column holding the key is the
// conflict target.
//
// Write follows the Sink contract: it is synchronous (it returns once the
// rows are committed), safe for concurrent use, and keeps nothing of the
// batch. Re-delivered records overwrite their own rows (update) or leave them
// (ignore), so replaying a window again leaves the same table. Duplicate keys
// in one batch are resolved as separate batches would be: with update the
// last offset wins, with ignore the first, so the result does not depend on
// where the runner cut the batches — nor on whether the batch went through
// COPY.
type Sink struct {
	pool   *pgxpool.Pool
	name   string // Table as configured, for messages
	table  string // quoted
	keyer  *sinks.Keyer
	ignore bool
	cols   []encode.Column
	key    int // index of the key column
	// upsert is the statement over arrays; createTemp, copyCols and
	// fromTemp the COPY path's; copyAbove its threshold.
	upsert, createTemp, fromTemp string
	copyCols                     []string
	copyAbove                    int
	ckpt                         *sqlcheckpoint.Postgres
	log                          zerolog.Logger
	secrets                      []string
}

var (
	_ sinks.Sink            = (*Sink)(nil)
	_ sinks.CheckpointStore = (*Sink)(nil)
)

// Capabilities declares the checkpoint table (Checkpoints returns none
// when the plan configures none).
func (s *Sink) Capabilities() sinks.Capabilities { return sinks.Capabilities{Checkpoints: s} }

// New connects to cfg.DSN, creates the table when asked, and checks
// that the table can take the upsert (columns, types, a unique key).
// Connection errors are returned as they are: the caller retries or fails.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	table, err := encode.QuoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: table %q: %w", cfg.Table, err)
	}
	s := &Sink{name: cfg.Table, table: table, keyer: cfg.Keyer, log: cfg.Log, secrets: dsnSecrets(cfg.DSN), copyAbove: cfg.CopyThreshold}
	if s.copyAbove <= 0 {
		s.copyAbove = plan.DefaultCopyThreshold
	}
	switch cfg.OnConflict {
	case "", "update":
	case "ignore":
		s.ignore = true
	default:
		return nil, fmt.Errorf("postgres sink: on_conflict %q: want update or ignore", cfg.OnConflict)
	}
	if s.cols, err = encode.ParseColumns(cfg.Columns, encode.DefaultColumns(), true); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if s.key, err = encode.KeyColumn(s.cols); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if cfg.Checkpoints.Table != "" {
		if s.ckpt, err = sqlcheckpoint.NewPostgres(cfg.Checkpoints); err != nil {
			return nil, fmt.Errorf("postgres sink: %w", err)
		}
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: parse dsn: %w", s.scrub(err))
	}
	if p := pcfg.ConnConfig.Password; p != "" {
		s.secrets = append(s.secrets, p)
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if err := s.prepare(ctx, cfg.CreateTable); err != nil {
		s.pool.Close()
		return nil, err
	}
	c := pcfg.ConnConfig
	s.log.Debug().Str("host", c.Host).Uint16("port", c.Port).Str("database", c.Database).
		Str("user", c.User).Str("table", cfg.Table).Bool("ignore", s.ignore).Msg("postgres sink ready")
	return s, nil
}

// prepare connects, creates the tables when asked, reads the types of the
// mapped columns, and checks the statements against the table: EXPLAIN
// plans a statement without running it, which resolves the table, the
// columns, their types and the ON CONFLICT target.
func (s *Sink) prepare(ctx context.Context, create bool) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if create {
		if err := createTable(ctx, s.pool, s.table, createTableSQL(s.table, s.cols, s.key)); err != nil {
			return fmt.Errorf("postgres sink: create table %s: %w", s.name, s.scrub(err))
		}
	}
	types, err := s.columnTypes(ctx)
	if err != nil {
		return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	s.upsert, s.createTemp, s.fromTemp, s.copyCols = upsertSQL(s.table, s.cols, types, s.key, s.ignore)
	if _, err := s.pool.Exec(ctx, "EXPLAIN "+s.upsert, s.newRows(0).args()...); err != nil {
		return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	if s.ckpt != nil {
		if err := s.ckpt.Prepare(ctx, s.pool, func(ctx context.Context, stmt string) error { return createTable(ctx, s.pool, s.ckpt.Name, stmt) }); err != nil {
			return fmt.Errorf("postgres sink: checkpoint table %s: %w", s.ckpt.Name, s.scrub(err))
		}
	}
	return nil
}

// columnTypes returns the declared type of each mapped column, as SQL
// (format_type): the values are cast to it, so that a text field can fill
// a numeric or an enum column of a table made by hand.
func (s *Sink) columnTypes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, s.table)
	if err != nil {
		return nil, err
	}
	declared := map[string]string{}
	var names []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		declared[name] = typ
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no such table (or no access to it): create it, or set create_table: true")
	}
	types := make([]string, len(s.cols))
	for i, c := range s.cols {
		t, ok := declared[c.Name]
		if !ok {
			return nil, fmt.Errorf("no column %q (the table has %s)", c.Name, strings.Join(names, ", "))
		}
		types[i] = t
	}
	return types, nil
}

// Write upserts batch in one transaction committed before Write returns,
// with the batch's checkpoint when the sink has a checkpoint table. A
// batch of more than CopyThreshold rows is copied into a temporary table
// first. A key template failing on a record returns its *record.Error and
// writes nothing; so does a row the database rejects (bad data, a
// constraint) when it can be pinned to one record. Any other failure is a
// plain error, and nothing is written.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres sink: upsert into %s: %w", s.name, err)
	}
	rows, err := s.rows(batch)
	if err != nil {
		return err
	}
	if len(rows.recs) > s.copyAbove {
		err = s.copyRows(ctx, rows, batch)
	} else {
		err = s.upsertRows(ctx, rows, batch)
	}
	if err != nil {
		return s.upsertError(ctx, rows, err)
	}
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows.recs)).Bool("copy", len(rows.recs) > s.copyAbove).Msg("upserted")
	return nil
}

// upsertRows runs the upsert over arrays: one statement, or with a
// checkpoint two statements in one round trip, which PostgreSQL runs as
// one implicit transaction.
func (s *Sink) upsertRows(ctx context.Context, rows *pgRows, batch []record.Record) error {
	if s.ckpt == nil {
		_, err := s.pool.Exec(ctx, s.upsert, rows.args()...)
		return err
	}
	b := &pgx.Batch{}
	b.Queue(s.upsert, rows.args()...)
	s.ckpt.Queue(b, batch)
	return s.pool.SendBatch(ctx, b).Close()
}

// copyRows copies the rows into a temporary table and upserts them from
// there, with the checkpoint, in one transaction.
func (s *Sink) copyRows(ctx context.Context, rows *pgRows, batch []record.Record) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, s.createTemp); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", copyTable}, s.copyCols, rows.copySource()); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(s.fromTemp)
	if s.ckpt != nil {
		s.ckpt.Queue(b, batch)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Finish does nothing: every Write is already committed.
func (s *Sink) Finish(context.Context) error { return nil }

// Close closes the connection pool.
func (s *Sink) Close() error {
	s.pool.Close()
	return nil
}

// Checkpoints returns the offsets the sink's checkpoint table holds for
// group and topic, written by this run (sqlcheckpoint.Config.RunID); none
// without a checkpoint table.
func (s *Sink) Checkpoints(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if s.ckpt == nil {
		return nil, nil
	}
	out, err := s.ckpt.Read(ctx, s.pool, group, topic)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read checkpoints from %s: %w", s.ckpt.Name, s.scrub(err))
	}
	return out, nil
}

// ResetCheckpoints deletes the checkpoints of group and topic.
func (s *Sink) ResetCheckpoints(ctx context.Context, group, topic string) error {
	if s.ckpt == nil {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.ckpt.Reset, group, topic); err != nil {
		return fmt.Errorf("postgres sink: reset checkpoints in %s: %w", s.ckpt.Name, s.scrub(err))
	}
	return nil
}

// upsertError turns a failed upsert into the error Write returns: a
// *record.Error when the database rejected the data of one row, found by
// probing the rows one by one, else a plain error.
func (s *Sink) upsertError(ctx context.Context, rows *pgRows, err error) error {
	err = fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(err))
	if !rejectsData(err) || ctx.Err() != nil {
		return err
	}
	i, rowErr := s.probe(ctx, rows)
	if i < 0 {
		return err
	}
	return record.NewError(rows.recs[i], fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(rowErr)))
}

// rejectsData reports whether err is the database refusing the data of a
// row: a data exception (class 22: bad encoding, a value out of range, JSON
// that PostgreSQL does not take such as \u0000), an integrity constraint
// violation (class 23), or a row too big for an index (54000).
func rejectsData(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23") || pgErr.Code == "54000"
}

// probe finds the row the database rejects: it upserts the rows one
// statement each, pipelined in one round trip inside a transaction that is
// rolled back, so nothing is written. The server skips every statement after
// the first failure, so the first error names the row. It returns -1 when
// no single row fails on its own.
func (s *Sink) probe(ctx context.Context, rows *pgRows) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return -1, nil
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // the probe is never kept
	b := &pgx.Batch{}
	for i := range rows.recs {
		b.Queue(s.upsert, rows.one(i).args()...)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for i := range rows.recs {
		if _, err := br.Exec(); err != nil {
			if rejectsData(err) {
				return i, err
			}
			return -1, nil
		}
	}
	return -1, nil
}

// scrub hides the DSN's password in err's message (pgx redacts it on a best
// effort basis; a malformed DSN can still be quoted whole by url.Parse).
func (s *Sink) scrub(err error) error {
	if err == nil || len(s.secrets) == 0 {
		return err
	}
	return &scrubbedError{err: err, secrets: s.secrets}
}

type scrubbedError struct {
	err     error
	secrets []string
}

func (e *scrubbedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s), strings.Trim(strconv.Quote(s), `"`)} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}

func (e *scrubbedError) Unwrap() error { return e.err }

var (
	urlPassword = regexp.MustCompile(`^[a-z]+://[^:/?#@]*:(.*)@`)
	kvPassword  = regexp.MustCompile(`(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
)

// dsnSecrets finds the password spellings in dsn without relying on it
// parsing: the raw text and its unescaped form.
func dsnSecrets(dsn string) []string {
	var raw []string
	if m := urlPassword.FindStringSubmatch(dsn); m != nil {
		raw = append(raw, m[1])
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		raw = append(raw, strings.Trim(m[1], "'"))
	}
	if u, err := url.Parse(dsn); err == nil {
		if p, ok := u.User.Password(); ok {
			raw = append(raw, p)
		}
		for k, vs := range u.Query() {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				raw = append(raw, vs...)
			}
		}
	}
	var out []string
	for _, s := range raw {
		if s == "" {
			continue
		}
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
	}
	return out
}

// createTable runs stmt, a CREATE TABLE IF NOT EXISTS of table, under a
// transaction-scoped advisory lock on the table's name: processes that
// create the same table at once (run --join) would otherwise fail on
// PostgreSQL's catalog (23505 on pg_type_typname_nsp_index), since IF NOT
// EXISTS does not serialize them.
func createTable(ctx context.Context, pool *pgxpool.Pool, table, stmt string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('replay create table ' || $1, 0))`, table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, stmt)
		return err
	})
}
