package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// provenanceColumns maps the key and the provenance fields, whose stored
// values the upserts read back for the collision counts.
var provenanceColumns = plan.Columns{{Name: "id", Field: "key"}, {Name: "tp", Field: "topic"}, {Name: "pa", Field: "partition"}, {Name: "os", Field: "offset"}}

// A role granted SELECT on the mapped columns only (not on another column
// of the table) writes and counts as any other: the upserts read the
// stored rows' key, version and provenance columns, not the whole row.
func TestPostgresColumnPrivilegesSuffice(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	role, _ := loginRole(t, dsn, "replay_columns")
	for _, version := range []string{"", "offset"} {
		t.Run("version="+version, func(t *testing.T) {
			table := testenv.TableName()
			q := pgx.Identifier{table}.Sanitize()
			cols := "id, tp, pa, os"
			ddl := `CREATE TABLE ` + q + ` (id text PRIMARY KEY, tp text NOT NULL, pa int NOT NULL, os bigint NOT NULL, secret text`
			if version != "" {
				cols += ", replay_version"
				ddl += `, replay_version bigint`
			}
			for _, stmt := range []string{
				ddl + `)`,
				`INSERT INTO ` + q + ` (id, tp, pa, os, secret) VALUES ('k1', 'other', 9, 1, 'not for the replay role')`,
				// xmax: the upserts tell inserted from updated rows by it.
				`GRANT SELECT (` + cols + `, xmax), INSERT (` + cols + `), UPDATE (` + cols + `) ON ` + q + ` TO ` + role,
			} {
				if _, err := conn.Exec(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsnWith(t, dsn, "user", role), Table: table,
				Columns: provenanceColumns, Version: version, CopyThreshold: 1})
			sinktest.MustWrite(t, s, sinktest.Rec(0, 5, "k1", `{}`), sinktest.Rec(0, 6, "k2", `{}`))
			if o := s.Outcomes(); o.Inserted != 1 || o.Updated != 1 || o.Collisions != 1 {
				t.Errorf("outcomes %+v, want 1 inserted, 1 updated (k1, stored from another topic: 1 collision)", o)
			}
		})
	}
}

// Keys that differ as text but are one key to the column (1.00 and 1.000
// in a numeric column) each count one collision with the row stored from
// another partition, not one per spelling of the key in the batch. Only
// on_conflict: ignore can take both spellings in one batch (update refuses
// to change a row twice in a statement); its statement reads the stored
// rows of the batch's keys, once per key.
func TestPostgresEqualKeysCollideOnce(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	if _, err := testenv.PgConn(t, dsn).Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+
		` (id numeric PRIMARY KEY, tp text NOT NULL, pa int NOT NULL, os bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, Columns: provenanceColumns,
		OnConflict: "ignore", CopyThreshold: 1})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "1", `{}`))
	sinktest.MustWrite(t, s, sinktest.Rec(1, 1, "1.00", `{}`), sinktest.Rec(1, 2, "1.000", `{}`))
	if o := s.Outcomes(); o.Collisions != 2 || o.Inserted != 1 || o.Ignored != 2 {
		t.Errorf("outcomes %+v, want 1 inserted, 2 ignored, 2 collisions (each record of partition 1 with the row from partition 0)", o)
	}
}
