// Package postgres is the sink that upserts records into a PostgreSQL
// table, one row per idempotency key.
package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/dbsection"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Config configures a PostgreSQL sink.
type Config struct {
	// Mapped: the plan's mapping replaced each record's value
	// (sinks.Options.Mapped). value_bytes keeps the bytes as read; the
	// value column then holds the mapped value, which is no function of
	// them.
	Mapped bool
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
	// Columns with types that follow their fields. A table that exists is
	// used as it is (no CREATE privilege needed).
	CreateTable bool
	// Columns maps the table's columns to record fields; one must hold the
	// idempotency key. Empty means the default layout.
	Columns plan.Columns
	// CopyThreshold: a batch of more rows than this is loaded with COPY
	// into a temporary table, then upserted from it; smaller batches are
	// one statement over arrays. 0 means DefaultCopyThreshold. While the
	// table holds none of the keys written, a batch goes without ON
	// CONFLICT: copied into the table itself, whatever its size, when every
	// column takes its values as sent, else inserted.
	CopyThreshold int
	// OnTombstone is what a tombstone does: dbsection.OnTombstoneWrite ("" too:
	// a row with a NULL value), dbsection.OnTombstoneDelete (removes the key's
	// row) or dbsection.OnTombstoneSkip (not written, counted as ignored).
	OnTombstone string
	// Version is the record field (as in Columns) that guards upserts:
	// a stored row changes only for a greater version. "" means no guard.
	Version string
	// Connections is how many connections a Write shards its keys over,
	// 1..sinks.MaxConnections; 0 means 1.
	Connections int
	// LockTimeout is, with Connections above 1, the lock_timeout of the
	// sink's connections: how long a statement waits for a row lock
	// before it fails (SQLSTATE 55P03) and the Write resolves the wait
	// (shardLockWait). 0 means DefaultLockTimeout; a lock_timeout the DSN
	// sets, other than 0, wins.
	LockTimeout time.Duration
	// ApplicationName is set as application_name on every connection
	// unless the DSN sets one; "" means "replay".
	ApplicationName string
	// Checkpoints, when its Table is set, records the offset after each
	// batch in that table, in the batch's transaction (see sinks.CheckpointStore).
	Checkpoints sqlcheckpoint.Config
	// DecodedValue and DecodedKey say that the plan decodes values (keys)
	// from the Confluent wire format: the default layout then stores the
	// decoded value in value and adds value_schema_id (the decoded key in
	// kafka_key_json, and key_schema_id); value_bytes and kafka_key keep
	// the bytes. Mapped columns read the decoded value either way.
	DecodedValue, DecodedKey bool
	// Log receives diagnostics; the zero value discards them.
	Log zerolog.Logger
}

// Sink upserts records into one table, one row per idempotency key.
// Without a column mapping the table has the default layout
// (docs/sinks/postgres.md, "The default layout"):
//
//	key text primary key, topic text not null, partition int not null,
//	"offset" bigint not null, "timestamp" timestamptz not null,
//	value jsonb, value_bytes bytea, kafka_key bytea, headers jsonb not null
//	[, value_schema_id integer] [, kafka_key_json jsonb, key_schema_id integer]
//	[, replay_version bigint | timestamptz | jsonb]
//
// The schema id columns (and kafka_key_json) are there when the plan
// decodes values (keys): value then holds the decoded value.
// value_bytes and kafka_key are the exact bytes (NULL for a tombstone, a
// null key); value is the value as jsonb when it is JSON that jsonb takes,
// else NULL; headers is a JSON array of {"key","value"} in record order, a
// key or value that is not UTF-8 text without NUL in base64 marked with
// "key_encoding"/"value_encoding": "base64" (ReadRecords reads it all
// back). With a mapping, each column holds the field it names: a bytea
// column the raw bytes, a text column the text (a value that is not UTF-8,
// or that the column would cut, round or overflow, is a bad record), and
// the column holding the key is the conflict target.
//
// Write follows the Sink contract: it is synchronous (it returns once the
// rows are committed), safe for concurrent use, and keeps nothing of the
// batch. Re-delivered records leave their own rows unchanged (update) or
// leave them (ignore), so replaying a window again leaves the same table.
// The result does not depend on where the runner cut the batches, nor on
// whether a batch went through COPY.
type Sink struct {
	pool        *pgxpool.Pool
	name        string // Table as configured, for messages
	table       string // quoted
	ignore      bool
	onTombstone string
	cols        []pgColumn
	key         int // index of the key column
	ver         int // index of the version column, -1 without
	defaults    bool
	st          statements
	// mostlySame: the last upsert found most of its rows unchanged, stale
	// or duplicate, or, before the first, the table held rows at open
	// (statements.upsertSame).
	mostlySame atomic.Bool
	// fresh: the last upsert inserted every row, or, before the first, the
	// table was empty at open. plain: the table has no row-level security,
	// rules or triggers of its own, so a fresh batch can be written without
	// ON CONFLICT (freshShard); direct: plain, and every column's values
	// travel in its declared type, so it can be copied into the table.
	fresh       atomic.Bool
	direct      bool
	plain       bool
	copyAbove   int
	connections int
	acquire     sync.Mutex // held while a sharded Write acquires its connections
	ckpt        *sqlcheckpoint.Postgres
	// created: the table did not exist when the sink was opened
	// (create_table created it); pos is what the sink reports durable.
	created bool
	pos     sqlcheckpoint.Positions
	// rejected: the rows the database rejected in the last failed Write
	// of each partition (rejectedRows).
	rejected sqlcheckpoint.Rejected
	log      zerolog.Logger
	secrets  []string

	outMu sync.Mutex
	out   sinks.Outcomes
}

// Capabilities declares the checkpoint table (Checkpoints returns none
// when the plan configures none), the outcome counts, and the durable
// positions and resume reconciliation that keep a resume from trusting
// commits the table no longer backs.
func (s *Sink) Capabilities() sinks.Capabilities {
	keys := sinks.KeysAll
	if s.onTombstone == dbsection.OnTombstoneSkip {
		keys = sinks.KeysButTombstones
	}
	return sinks.Capabilities{Checkpoints: s, Outcomes: s, Positioner: s, Reconciler: s, Keys: keys}
}

// Outcomes returns what the committed writes did since the sink was
// opened, as PostgreSQL reported it.
func (s *Sink) Outcomes() sinks.Outcomes {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out
}

// New connects to cfg.DSN, creates the table when asked and missing, and
// checks that the table can take the upsert (columns, types, a unique
// key). Connection errors are returned as they are: the caller retries or
// fails.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	table, err := encode.QuoteTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: table %q: %w", cfg.Table, err)
	}
	s := &Sink{name: cfg.Table, table: table, log: cfg.Log, secrets: dsnSecrets(cfg.DSN), copyAbove: cfg.CopyThreshold,
		connections: max(cfg.Connections, 1), ver: -1}
	if s.copyAbove <= 0 {
		s.copyAbove = DefaultCopyThreshold
	}
	if s.connections > sinks.MaxConnections {
		return nil, fmt.Errorf("postgres sink: connections %d: want 1..%d", cfg.Connections, sinks.MaxConnections)
	}
	if s.ignore, err = dbsection.Ignore(cfg.OnConflict); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if s.onTombstone = cmp.Or(cfg.OnTombstone, dbsection.OnTombstoneWrite); !slices.Contains(dbsection.OnTombstones, s.onTombstone) {
		return nil, fmt.Errorf("postgres sink: on_tombstone %q: want write, delete or skip", cfg.OnTombstone)
	}
	if err := s.layout(cfg); err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	if cfg.Checkpoints.Table != "" {
		if s.ckpt, err = sqlcheckpoint.NewPostgres(cfg.Checkpoints); err != nil {
			return nil, fmt.Errorf("postgres sink: %w", err)
		}
	}
	pcfg, err := s.poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		registerArrays(c.TypeMap())
		if _, err := c.Exec(ctx, backendMallocWarmup); err != nil {
			s.log.Debug().Err(s.scrub(err)).Msg("malloc warm-up of a new connection failed; writing without it")
		}
		if s.st.createTemp == "" { // while prepare inspects the table
			return nil
		}
		if _, err := c.Exec(ctx, s.st.createTemp); err != nil {
			// 42501: insufficient privilege; 25006: a read-only transaction.
			if code := sqlState(err); code == "42501" || code == "25006" {
				return fmt.Errorf("create the connection's temporary COPY table %s (the role needs TEMPORARY on the database, and a transaction that can write): %w", copyTable, err)
			}
			return fmt.Errorf("create the connection's temporary COPY table %s: %w", copyTable, err)
		}
		return nil
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if err := s.prepare(ctx, cfg); err != nil {
		s.pool.Close()
		return nil, err
	}
	c := pcfg.ConnConfig
	s.log.Debug().Str("host", c.Host).Uint16("port", c.Port).Str("database", c.Database).
		Str("user", c.User).Str("table", cfg.Table).Bool("ignore", s.ignore).Int("connections", s.connections).Msg("postgres sink ready")
	return s, nil
}

// poolConfig is the pool configuration of cfg.DSN with the run-time
// parameters the sink needs (application_name, client_encoding, jit, and
// for a sharded sink lock_timeout) where the DSN leaves them unset, and
// the DSN's password among the secrets to scrub from errors.
func (s *Sink) poolConfig(cfg Config) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: parse dsn: %w", s.scrub(err))
	}
	if p := pcfg.ConnConfig.Password; p != "" {
		s.secrets = append(s.secrets, p)
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set {
		pcfg.ConnConfig.RuntimeParams["application_name"] = cmp.Or(cfg.ApplicationName, "replay")
	}
	// The sink sends UTF-8; unset, client_encoding is the database's (a
	// LATIN1 database stored "café" as "cafÃ©"). With UTF8 the server
	// converts, and refuses a character its encoding lacks (a bad record).
	switch enc := pcfg.ConnConfig.RuntimeParams["client_encoding"]; strings.ToUpper(strings.ReplaceAll(enc, "-", "")) {
	case "":
		pcfg.ConnConfig.RuntimeParams["client_encoding"] = "UTF8"
	case "UTF8", "UNICODE":
	default:
		return nil, fmt.Errorf("postgres sink: the dsn sets client_encoding=%s: the sink sends UTF-8 text; remove the setting (PostgreSQL converts to the database's encoding)", enc)
	}
	// JIT compiling a large batch's upsert takes longer than running it.
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set {
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if s.connections > 1 {
		pcfg.MaxConns = int32(s.connections)
		// A shard can wait for a row lock of another shard of the same
		// Write, which waits for every shard before it commits: a wait
		// PostgreSQL cannot see. lock_timeout ends it (shardLockWait).
		if v, set := pcfg.ConnConfig.RuntimeParams["lock_timeout"]; !set || zeroDuration(v) {
			d := cfg.LockTimeout
			if d <= 0 {
				d = DefaultLockTimeout
			}
			pcfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
		}
	}
	return pcfg, nil
}

// DefaultLockTimeout is the lock_timeout of a sharded sink's connections
// (Config.LockTimeout): as long as PostgreSQL's default deadlock_timeout,
// after which it looks for a deadlock among the waits it can see.
const DefaultLockTimeout = time.Second

// zeroDuration reports whether v, a PostgreSQL duration setting ("0",
// "0ms", "0.0s"), is zero or not a positive number: lock_timeout = 0
// means no timeout.
func zeroDuration(v string) bool {
	v = strings.TrimLeft(strings.TrimSpace(v), "0.")
	return v == "" || v[0] < '1' || v[0] > '9'
}

// backendMallocWarmup runs once on every new connection: the server
// process allocates and frees one 4 MiB block, which raises glibc's
// dynamic mmap and trim thresholds to its size. Without it a new backend
// gives its heap back to the kernel (brk) after every batch and takes it
// again for the next: about a third of the server's CPU on a fresh load
// (24,000 brk calls for 250,000 rows; about 100 with it). The server
// keeps at most 8 MiB of freed heap per connection; other allocators
// (musl) are unaffected. A DBA can do the same for every client with
// GLIBC_TUNABLES=glibc.malloc.trim_threshold=… in the server's
// environment. The SQL comment says so to a DBA reading the server's
// log; the functions and operators are pg_catalog's whatever the
// search_path; random() keeps the planner from folding the constant;
// repeat() of a 64-byte string is cheap (5-8 ms per connection). A
// failure is logged at debug level, not an error.
var backendMallocWarmup = `/* replay: keep this connection's heap between batches (glibc trim threshold) */ ` +
	`SELECT pg_catalog.octet_length(pg_catalog.repeat('` + strings.Repeat("x", 64) + `', 65536 OPERATOR(pg_catalog.+) (pg_catalog.random() OPERATOR(pg_catalog.*) 0)::int))`

// layout sets the columns: the default layout or the mapping, plus the
// version column.
func (s *Sink) layout(cfg Config) error {
	if len(cfg.Columns) == 0 {
		s.defaults = true
		s.cols = defaultColumns(cfg.DecodedValue, cfg.DecodedKey)
	} else {
		mapped, err := encode.ParseColumns(cfg.Columns, nil, true)
		if err != nil {
			return err
		}
		for _, c := range mapped {
			s.cols = append(s.cols, pgColumn{name: c.Name, field: c.Field})
		}
	}
	if cfg.Version != "" {
		f, err := dbsection.ParseVersion(cfg.Version)
		if err != nil {
			return err
		}
		for i, c := range s.cols {
			if !s.defaults && c.field == f {
				s.ver = i
			}
		}
		if s.ver < 0 {
			s.cols = append(s.cols, pgColumn{name: versionColumn, field: f})
			s.ver = len(s.cols) - 1
		}
	}
	key, err := encode.KeyColumn(s.cols, func(c pgColumn) bool { return c.field.Kind == plan.FieldKey }, func(c pgColumn) string { return c.name })
	s.key = key
	return err
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
