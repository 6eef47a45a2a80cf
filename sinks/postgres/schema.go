package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replay-tool/replay/plan"
)

// prepare connects, creates the tables when cfg asks and they are
// missing, reads the declared type of each column, builds the statements,
// and checks them against the table: EXPLAIN plans a statement without
// running it, which resolves the table, the columns, their types and the
// ON CONFLICT target.
func (s *Sink) prepare(ctx context.Context, cfg Config) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres sink: connect: %w", s.scrub(err))
	}
	if cfg.CreateTable {
		if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NULL`, s.table).Scan(&s.created); err != nil {
			return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
		}
		if err := createTable(ctx, s.pool, s.table, createTableSQL(s.table, s.cols, s.key)); err != nil {
			return fmt.Errorf("postgres sink: create table %s: %w", s.name, s.scrub(err))
		}
	}
	if err := s.columnTypes(ctx); err != nil {
		return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	// COPY into the table itself needs no row-level security (which
	// refuses COPY), rules (which COPY ignores) or triggers of its own.
	var plainTable, triggers, partitioned bool
	if err := s.pool.QueryRow(ctx, `SELECT c.relkind = 'r' AND NOT c.relrowsecurity AND NOT c.relhasrules,
	EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal), c.relkind = 'p'
FROM pg_class c WHERE c.oid = to_regclass($1)`, s.table).Scan(&plainTable, &triggers, &partitioned); err != nil {
		return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
	}
	// The upserts tell inserted rows from updated ones by xmax.
	if partitioned {
		return fmt.Errorf("postgres sink: table %s is partitioned, which the sink cannot upsert into with honest counts (PostgreSQL does not return a partitioned table's xmax, which tells an inserted row from an updated one); write to one of its partitions, or to a plain table", s.name)
	}
	sh := sqlShape{table: s.table, cols: s.cols, key: s.key, ver: s.ver, prov: [3]int{-1, -1, -1}, ignore: s.ignore, exactBytes: s.defaults && !cfg.Mapped, triggers: triggers, image: true}
	for i, c := range s.cols {
		for j, k := range []plan.FieldKind{plan.FieldTopic, plan.FieldPartition, plan.FieldOffset} {
			if c.field.Kind == k && sh.prov[j] < 0 {
				sh.prov[j] = i
			}
		}
	}
	s.st = sh.build()
	if s.st.imageCheck != "" {
		if _, err := s.pool.Exec(ctx, s.st.imageCheck); err != nil {
			s.log.Debug().Str("table", s.name).Err(s.scrub(err)).Msg("the table's types do not allow comparing rows by their bytes; comparing them as text")
			sh.image = false
			s.st = sh.build()
		}
	}
	s.direct = plainTable && !triggers
	s.plain = s.direct
	for _, c := range s.cols {
		s.direct = s.direct && c.sentAsDeclared()
	}
	for _, stmt := range []string{s.st.upsert, s.st.upsertSame} {
		if stmt == "" {
			continue
		}
		if _, err := s.pool.Exec(ctx, "EXPLAIN "+stmt, newRows(s.cols, 0).args()...); err != nil {
			return fmt.Errorf("postgres sink: check table %s: %w", s.name, s.scrub(err))
		}
	}
	// A table holding rows starts with the statements that leave out
	// identical rows; each batch's outcome then decides.
	rows, err := s.hasRows(ctx)
	if err != nil {
		return err
	}
	s.mostlySame.Store(rows)
	s.fresh.Store(!rows)
	if s.ckpt != nil {
		if err := s.ckpt.Prepare(ctx, s.pool, func(ctx context.Context, stmt string) error { return createTable(ctx, s.pool, s.ckpt.Name, stmt) }); err != nil {
			return fmt.Errorf("postgres sink: checkpoint table %s: %w", s.ckpt.Name, s.scrub(err))
		}
	}
	// The connections opened so far lack the COPY table: new ones create it.
	s.pool.Reset()
	return nil
}

// columnTypes reads the declared type of each column (for the checks of
// check.go) and chooses how its values travel. A default-layout table
// that lacks columns is refused with the statement that adds them.
func (s *Sink) columnTypes(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), coalesce(bt.typname, t.typname), a.atttypmod, t.typtype = 'd'
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, s.table)
	if err != nil {
		return err
	}
	declared := map[string]declType{}
	var names []string
	for rows.Next() {
		var name string
		var d declType
		if err := rows.Scan(&name, &d.sql, &d.base, &d.typmod, &d.domain); err != nil {
			return err
		}
		declared[name] = d
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("no such table (or no access to it): create it, or set create_table: true")
	}
	var missing, add []string
	for i := range s.cols {
		c := &s.cols[i]
		d, ok := declared[c.name]
		if !ok {
			missing = append(missing, c.name)
			add = append(add, "ADD COLUMN "+c.quoted()+" "+c.createType())
			continue
		}
		c.decl = d
		if d.base == "json" { // values travel as jsonb, which reorders keys
			return fmt.Errorf("column %s is json, whose text replay cannot keep as the record has it: make it jsonb (PostgreSQL's normalized JSON) or text (the exact text)", c.name)
		}
		c.chooseSend()
		if c.bytes && c.send != sendBytes || c.jsonOrNull && c.send != sendJSONText || c.schemaID && d.base != "int2" && d.base != "int4" && d.base != "int8" {
			return fmt.Errorf("column %s is %s: the default layout wants %s", c.name, d.sql, c.createType())
		}
	}
	switch {
	case len(missing) == 0:
		return nil
	case s.defaults || len(missing) == 1 && s.ver >= 0 && missing[0] == versionColumn:
		return fmt.Errorf("the table has no column %s (it has %s; %s): "+
			"add them with ALTER TABLE %s %s, or write to a new table", strings.Join(missing, ", "), strings.Join(names, ", "), missingWhy(missing), s.table, strings.Join(add, ", "))
	}
	return fmt.Errorf("no column %s (the table has %s)", strings.Join(missing, ", "), strings.Join(names, ", "))
}

// createTable runs stmt, a CREATE TABLE IF NOT EXISTS of table, unless
// the table exists (the statement would need CREATE on the schema), under
// an advisory lock on the table's name: IF NOT EXISTS does not serialize
// processes creating it at once, as run --join does (23505 on
// PostgreSQL's catalog).
func createTable(ctx context.Context, pool *pgxpool.Pool, table, stmt string) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return fmt.Errorf("looking up whether it exists: %w", err)
	}
	if exists {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('replay create table ' || $1, 0))`, table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, stmt)
		return err
	})
}
