package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/encode"
)

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
