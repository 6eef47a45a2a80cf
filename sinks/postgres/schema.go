package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
