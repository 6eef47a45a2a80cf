package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// Every statement that looks a batch's keys up in the table does so by
// the key's index, however large the planner guesses the COPY table: on a
// table of 20,000 rows, where a flattened NOT EXISTS is planned as a hash
// anti join over a sequential scan of the whole table (35 ms per 1000-row
// batch of a re-run, measured, against 4 ms by index), no plan of the
// sink's upserts reads the table by a sequential scan. Checked for the
// default layout (provenance counts: the old rows of updated keys), with a
// version column (the old rows of every key), and for a character(12) key
// column, which text = character comparisons cannot look up by its index.
func TestPostgresStatementsProbeTheKeyIndex(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	charCols := plan.Columns{{Name: "id", Field: "key"}, {Name: "payload", Field: "value"}, {Name: "tp", Field: "topic"}, {Name: "pa", Field: "partition"}, {Name: "os", Field: "offset"}}
	for _, c := range []struct {
		name, version, ddl string
		cols               plan.Columns
	}{
		{name: "default"},
		{name: "version", version: "offset"},
		{name: "char-key", cols: charCols, ddl: `CREATE TABLE %s (id char(12) PRIMARY KEY, payload text, tp text NOT NULL, pa int NOT NULL, os bigint NOT NULL)`},
		{name: "char-key-version", cols: charCols, version: "offset",
			ddl: `CREATE TABLE %s (id char(12) PRIMARY KEY, payload text, tp text NOT NULL, pa int NOT NULL, os bigint NOT NULL, replay_version bigint)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := testenv.TableName()
			if c.ddl != "" {
				if _, err := testenv.PgConn(t, dsn).Exec(t.Context(), fmt.Sprintf(c.ddl, table)); err != nil {
					t.Fatal(err)
				}
			}
			s, err := New(t.Context(), Config{DSN: dsn, Table: table, CreateTable: c.ddl == "", Version: c.version, Columns: c.cols})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const rows = 20000
			for start := 0; start < rows; start += 1000 {
				batch := make([]record.Record, 0, 1000)
				for i := start; i < start+1000; i++ {
					batch = append(batch, sinktest.Rec(0, int64(i), fmt.Sprint("k", i), fmt.Sprintf(`{"id":%d,"note":"a value of some length, as records have"}`, i)))
				}
				sinktest.MustWrite(t, sinktest.Keyed(s, keyer), batch...)
			}
			conn := testenv.PgConn(t, dsn)
			if _, err := conn.Exec(t.Context(), s.st.createTemp); err != nil {
				t.Fatal(err)
			}
			stmts := map[string]string{"copyUpsert": s.st.copyUpsert, "copyUpsertSame": s.st.copyUpsertSame, "upsert": s.st.upsert, "upsertSame": s.st.upsertSame}
			for name, stmt := range stmts {
				if stmt == "" {
					continue
				}
				var args []any
				if !strings.Contains(stmt, "pg_temp.") { // the statements over arrays: one empty array each
					for range s.cols {
						args = append(args, nil)
					}
				}
				plan := explain(t, conn, stmt, args)
				if !strings.Contains(plan, table+"_pkey") {
					t.Errorf("%s: the plan does not use the key's index:\n%s", name, plan)
				}
				for line := range strings.Lines(plan) {
					if strings.Contains(line, "Seq Scan on "+table+" ") {
						t.Errorf("%s: the plan reads %s by a sequential scan:\n%s", name, table, plan)
						break
					}
				}
			}
		})
	}
}

// explain returns PostgreSQL's plan of stmt (EXPLAIN, which runs nothing).
func explain(t *testing.T, conn *pgx.Conn, stmt string, args []any) string {
	t.Helper()
	rows, _ := conn.Query(t.Context(), "EXPLAIN "+stmt, args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, stmt)
	}
	return strings.Join(lines, "\n") + "\n"
}
