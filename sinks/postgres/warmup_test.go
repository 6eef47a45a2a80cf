package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// The warm-up every new connection runs calls pg_catalog's functions and
// operators whatever the search_path: a schema ahead of pg_catalog that
// defines its own repeat, octet_length, random, + and * (each recording
// its call) sees none of them called while the sink opens and writes.
func TestPostgresWarmupIgnoresSearchPath(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	schema := fmt.Sprintf("replay_shadow_%x", rand.Uint64())
	sc := pgx.Identifier{schema}.Sanitize()
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `DROP SCHEMA `+sc+` CASCADE`) })
	record := func(name string) string {
		return `BEGIN INSERT INTO ` + sc + `.calls VALUES ('` + name + `'); `
	}
	for _, stmt := range []string{
		`CREATE SCHEMA ` + sc,
		`CREATE TABLE ` + sc + `.calls (name text)`,
		`CREATE FUNCTION ` + sc + `.repeat(text, integer) RETURNS text LANGUAGE plpgsql AS $$` + record("repeat") + `RETURN 'x'; END $$`,
		`CREATE FUNCTION ` + sc + `.octet_length(text) RETURNS integer LANGUAGE plpgsql AS $$` + record("octet_length") + `RETURN 1; END $$`,
		`CREATE FUNCTION ` + sc + `.random() RETURNS double precision LANGUAGE plpgsql AS $$` + record("random") + `RETURN 0; END $$`,
		`CREATE FUNCTION ` + sc + `.plus(integer, integer) RETURNS integer LANGUAGE plpgsql AS $$` + record("+") + `RETURN 1; END $$`,
		`CREATE OPERATOR ` + sc + `.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = ` + sc + `.plus)`,
		`CREATE FUNCTION ` + sc + `.times(double precision, integer) RETURNS double precision LANGUAGE plpgsql AS $$` + record("*") + `RETURN 0; END $$`,
		`CREATE OPERATOR ` + sc + `.* (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = ` + sc + `.times)`,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	s := newPostgres(t, postgres.Config{DSN: dsnWith(t, dsn, "search_path", schema+",pg_catalog,public"), Table: testenv.TableName(), CreateTable: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "a", `{}`))
	rows, _ := conn.Query(t.Context(), `SELECT name FROM `+sc+`.calls`)
	calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Errorf("the search_path's own functions and operators ran: %v", calls)
	}
}
