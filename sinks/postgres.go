package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// PostgresConfig configures a PostgreSQL sink.
type PostgresConfig struct {
	// DSN is a libpq connection string, URL or key=value. Its password never
	// appears in errors or logs.
	DSN string
	// Table is an SQL name, optionally schema-qualified: unquoted parts fold
	// to lower case as in SQL, "quoted" parts are taken as written.
	Table string
	// OnConflict is "update" (default: the replayed record wins) or "ignore"
	// (the row already stored wins).
	OnConflict string
	// CreateTable creates Table with the default layout when it is missing.
	CreateTable bool
	// Keyer computes the key column; nil means DefaultKey.
	Keyer *Keyer
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Postgres upserts records into one table, one row per idempotency key:
//
//	key text primary key, topic text not null, partition int not null,
//	"offset" bigint not null, "timestamp" timestamptz not null,
//	value jsonb, headers jsonb not null
//
// value is the record value when it is valid JSON (invalid UTF-8 in it
// replaced by U+FFFD), else the value as a JSON string, NULL for a
// tombstone; headers is a JSON array of {"key","value"} in record order.
//
// Write follows the Sink contract: it is synchronous (it returns once the
// rows are committed), safe for concurrent use, and keeps nothing of the
// batch. Re-delivered records overwrite their own rows (update) or leave them
// (ignore), so replaying a window again leaves the same table. Duplicate keys
// in one batch are resolved as separate batches would be: with update the
// last offset wins, with ignore the first, so the result does not depend on
// where the runner cut the batches.
type Postgres struct {
	pool    *pgxpool.Pool
	name    string // Table as configured, for messages
	keyer   *Keyer
	ignore  bool
	upsert  string
	log     zerolog.Logger
	secrets []string
}

var _ Sink = (*Postgres)(nil)

// NewPostgres connects to cfg.DSN, creates the table when asked, and checks
// that the table can take the upsert (columns, types, a unique key).
// Connection errors are returned as they are: the caller retries or fails.
func NewPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	table, err := quoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: table %q: %w", cfg.Table, err)
	}
	s := &Postgres{name: cfg.Table, keyer: cfg.Keyer, log: cfg.Log, secrets: dsnSecrets(cfg.DSN)}
	switch cfg.OnConflict {
	case "", "update":
	case "ignore":
		s.ignore = true
	default:
		return nil, fmt.Errorf("postgres sink: on_conflict %q: want update or ignore", cfg.OnConflict)
	}
	s.upsert = upsertSQL(table, s.ignore)
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
	if err := s.prepare(ctx, table, cfg.CreateTable); err != nil {
		s.pool.Close()
		return nil, err
	}
	c := pcfg.ConnConfig
	s.log.Debug().Str("host", c.Host).Uint16("port", c.Port).Str("database", c.Database).
		Str("user", c.User).Str("table", cfg.Table).Bool("ignore", s.ignore).Msg("postgres sink ready")
	return s, nil
}

// prepare connects, creates the table when asked, and checks the upsert
// against it: EXPLAIN plans the statement without running it, which
// resolves the table, the columns, their types and the ON CONFLICT target.
func (s *Postgres) prepare(ctx context.Context, table string, create bool) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if create {
		if _, err := s.pool.Exec(ctx, createTableSQL(table)); err != nil {
			return fmt.Errorf("postgres sink: create table %s: %w", s.name, s.scrub(err))
		}
	}
	if _, err := s.pool.Exec(ctx, "EXPLAIN "+s.upsert, (&pgRows{}).args()...); err != nil {
		return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	return nil
}

func createTableSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	"key" text PRIMARY KEY,
	"topic" text NOT NULL,
	"partition" int NOT NULL,
	"offset" bigint NOT NULL,
	"timestamp" timestamptz NOT NULL,
	"value" jsonb,
	"headers" jsonb NOT NULL
)`
}

// upsertSQL is one statement over arrays (one element per row), so a batch
// is one round trip. The rows must have distinct keys: ON CONFLICT DO UPDATE
// fails on a key it meets twice. An update that would change nothing is
// skipped, so a re-delivery does not rewrite (and bloat) identical rows.
func upsertSQL(table string, ignore bool) string {
	q := `INSERT INTO ` + table + ` AS t ("key", "topic", "partition", "offset", "timestamp", "value", "headers")
SELECT k, tp, p, o, ts, v::jsonb, h::jsonb
FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::timestamptz[], $6::text[], $7::text[]) AS u(k, tp, p, o, ts, v, h)
ON CONFLICT ("key") DO `
	if ignore {
		return q + `NOTHING`
	}
	return q + `UPDATE SET "topic" = excluded."topic", "partition" = excluded."partition",
	"offset" = excluded."offset", "timestamp" = excluded."timestamp",
	"value" = excluded."value", "headers" = excluded."headers"
WHERE (t."topic", t."partition", t."offset", t."timestamp", t."value", t."headers")
	IS DISTINCT FROM (excluded."topic", excluded."partition", excluded."offset", excluded."timestamp", excluded."value", excluded."headers")`
}

// Write upserts batch in one statement, which PostgreSQL runs as one
// transaction committed before Write returns. A key template failing on a
// record returns its *RecordError and writes nothing; so does a row the
// database rejects (bad data, a constraint) when it can be pinned to one
// record. Any other failure is a plain error, and nothing is written.
func (s *Postgres) Write(ctx context.Context, batch []Record) error {
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
	if _, err := s.pool.Exec(ctx, s.upsert, rows.args()...); err != nil {
		return s.upsertError(ctx, rows, err)
	}
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows.keys)).Msg("upserted")
	return nil
}

// Finish does nothing: every Write is already committed.
func (s *Postgres) Finish(context.Context) error { return nil }

// Close closes the connection pool.
func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

// pgRows holds a batch as the upsert's column arrays, one key each.
type pgRows struct {
	recs      []*Record
	keys      []string
	topics    []string
	parts     []int32
	offsets   []int64
	times     []time.Time
	values    []pgtype.Text
	headers   []string
	positions map[string]int // key → index
}

func (r *pgRows) args() []any {
	// Empty slices, not nil ones: pgx sends a nil slice as NULL, and
	// unnest(NULL) in EXPLAIN would not check the column types.
	return []any{
		nonNil(r.keys), nonNil(r.topics), nonNil(r.parts), nonNil(r.offsets),
		nonNil(r.times), nonNil(r.values), nonNil(r.headers),
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// rows computes the keys of batch and resolves duplicate keys: with update
// the last record of a key replaces the earlier ones, with ignore the first
// one stays.
func (s *Postgres) rows(batch []Record) (*pgRows, error) {
	rows := &pgRows{positions: make(map[string]int, len(batch))}
	for i := range batch {
		r := &batch[i]
		key, err := s.keyer.Key(r)
		if err != nil {
			return nil, err
		}
		j, dup := rows.positions[key]
		if dup && s.ignore {
			continue
		}
		if !dup {
			j = len(rows.keys)
			rows.positions[key] = j
			rows.recs = append(rows.recs, nil)
			rows.keys = append(rows.keys, key)
			rows.topics = append(rows.topics, "")
			rows.parts = append(rows.parts, 0)
			rows.offsets = append(rows.offsets, 0)
			rows.times = append(rows.times, time.Time{})
			rows.values = append(rows.values, pgtype.Text{})
			rows.headers = append(rows.headers, "")
		}
		rows.recs[j] = r
		rows.topics[j] = r.Topic
		rows.parts[j] = r.Partition
		rows.offsets[j] = r.Offset
		rows.times[j] = r.Time
		rows.values[j] = pgValue(r.Value)
		rows.headers[j] = pgHeaders(r.Headers)
	}
	return rows, nil
}

// one returns row i alone, for probing.
func (r *pgRows) one(i int) *pgRows {
	return &pgRows{
		keys: r.keys[i : i+1], topics: r.topics[i : i+1], parts: r.parts[i : i+1],
		offsets: r.offsets[i : i+1], times: r.times[i : i+1], values: r.values[i : i+1],
		headers: r.headers[i : i+1],
	}
}

// pgValue is the value column's text: the value when it is JSON, else the
// value as a JSON string (the same encoding as the file sink), NULL for a
// tombstone.
func pgValue(v []byte) pgtype.Text {
	switch {
	case v == nil:
		return pgtype.Text{}
	case json.Valid(v):
		return pgtype.Text{String: string(appendCleanJSON(nil, v)), Valid: true}
	default:
		return pgtype.Text{String: string(appendJSONBytes(nil, v)), Valid: true}
	}
}

func pgHeaders(hs []Header) string {
	b := append(make([]byte, 0, 64), '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, h.Key)
		b = append(b, `,"value":`...)
		b = appendBytesOrNull(b, h.Value)
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// upsertError turns a failed upsert into the error Write returns: a
// *RecordError when the database rejected the data of one row, found by
// probing the rows one by one, else a plain error.
func (s *Postgres) upsertError(ctx context.Context, rows *pgRows, err error) error {
	err = fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(err))
	if !rejectsData(err) || ctx.Err() != nil {
		return err
	}
	i, rowErr := s.probe(ctx, rows)
	if i < 0 {
		return err
	}
	return recordError(rows.recs[i], fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(rowErr)))
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
func (s *Postgres) probe(ctx context.Context, rows *pgRows) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return -1, nil
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // the probe is never kept
	b := &pgx.Batch{}
	for i := range rows.keys {
		b.Queue(s.upsert, rows.one(i).args()...)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for i := range rows.keys {
		if _, err := br.Exec(); err != nil {
			if rejectsData(err) {
				return i, err
			}
			return -1, nil
		}
	}
	return -1, nil
}

// quoteTable parses an SQL name, "name" or "schema.name", and returns it
// quoted. Unquoted parts fold to lower case, as PostgreSQL folds them.
func quoteTable(name string) (string, error) {
	var parts pgx.Identifier
	for rest := name; ; {
		var part string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest); i++ {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return "", errors.New("unterminated quoted identifier")
			}
			part, rest = b.String(), rest[i+1:]
		} else {
			end := strings.IndexAny(rest, `."`)
			if end < 0 {
				end = len(rest)
			}
			part, rest = asciiLower(rest[:end]), rest[end:]
		}
		if part == "" || strings.ContainsRune(part, 0) || strings.TrimSpace(part) != part {
			return "", errors.New(`want name or schema.name, each part non-empty ("quoted" to keep case or special characters)`)
		}
		parts = append(parts, part)
		if rest == "" {
			break
		}
		if rest[0] != '.' || len(parts) == 2 {
			return "", errors.New(`want name or schema.name ("quoted" to keep case or special characters)`)
		}
		rest = rest[1:]
	}
	return parts.Sanitize(), nil
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// scrub hides the DSN's password in err's message (pgx redacts it on a best
// effort basis; a malformed DSN can still be quoted whole by url.Parse).
func (s *Postgres) scrub(err error) error {
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
