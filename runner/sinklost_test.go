package runner

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/runner/group"
)

// lostTarget is a database table a test takes rows away from between an
// interrupted run and its resume.
type lostTarget struct {
	section string                             // the plan's sink section, without batch_size
	exec    func(t *testing.T, stmt string)    // runs a statement on the target
	coords  func(t *testing.T) []string        // "p/o" of every row, sorted
	ckpt    func(t *testing.T) map[int32]int64 // the checkpoint table's rows
}

func postgresLost(t *testing.T, checkpoints bool) lostTarget {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table, ckpt := testenv.TableName(), testenv.TableName()
	section := fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true", dsn, table)
	if checkpoints {
		section += ", checkpoint_table: " + ckpt
	}
	return lostTarget{
		section: section,
		exec: func(t *testing.T, stmt string) {
			t.Helper()
			if _, err := conn.Exec(t.Context(), fmt.Sprintf(stmt, pgx.Identifier{table}.Sanitize(), pgx.Identifier{ckpt}.Sanitize())); err != nil {
				t.Fatal(err)
			}
		},
		coords: func(t *testing.T) []string {
			t.Helper()
			rows, err := conn.Query(t.Context(), `SELECT partition || '/' || "offset" FROM `+pgx.Identifier{table}.Sanitize())
			if err != nil {
				t.Fatal(err)
			}
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return sorted(out)
		},
		ckpt: func(t *testing.T) map[int32]int64 {
			t.Helper()
			out := map[int32]int64{}
			rows, err := conn.Query(t.Context(), `SELECT partition, next_offset FROM `+pgx.Identifier{ckpt}.Sanitize())
			if err != nil {
				t.Fatal(err)
			}
			var p int32
			var next int64
			if _, err := pgx.ForEachRow(rows, []any{&p, &next}, func() error { out[p] = next; return nil }); err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
}

func sqliteLost(t *testing.T) lostTarget {
	path := filepath.Join(t.TempDir(), "orders.db")
	open := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return lostTarget{
		section: fmt.Sprintf("{type: sqlite, path: %q, table: orders, create_table: true, checkpoint_table: ckpt", path),
		exec: func(t *testing.T, stmt string) {
			t.Helper()
			if _, err := open(t).Exec(fmt.Sprintf(stmt, "orders", "ckpt")); err != nil {
				t.Fatal(err)
			}
		},
		coords: func(t *testing.T) []string {
			return queryRows(t, open(t), `SELECT "partition" || '/' || "offset" FROM orders`)
		},
		ckpt: func(t *testing.T) map[int32]int64 {
			out := map[int32]int64{}
			rows, err := open(t).Query(`SELECT "partition", "next_offset" FROM ckpt`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var p int32
				var next int64
				if err := rows.Scan(&p, &next); err != nil {
					t.Fatal(err)
				}
				out[p] = next
			}
			return out
		},
	}
}

// lostPlan is a plan over 3 partitions of orders writing to tg in batches
// of 100.
func lostPlan(t *testing.T, tg lostTarget) *plan.Plan {
	sb := newTestCluster(t, 3, "orders")
	seed(t, sb, "orders", 6000, t0, time.Hour)
	return testPlan(t, sb, fmt.Sprintf(`
version: 1
name: lost
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.lost
window:
%s
sink: %s, batch_size: 100}
`, timeWindow(t0.Add(5*time.Minute), t0.Add(55*time.Minute)), tg.section))
}

// Regression: a database sink's table lost rows between an interrupted run
// and its resume (dropped and created again by create_table, truncated,
// restored from a backup or replaced by a replica that lagged, which keeps
// the checkpoints of the same transactions): the resume trusted the
// group's commits, wrote the rest of the window only and succeeded with
// the rows below the commits missing (5,983 of 33,334 in the report). It
// now resumes each partition where the table's rows really end, and the
// table holds every record of the window exactly once.
func TestResumeRewritesWhatTheTableLost(t *testing.T) {
	// restoreHalf keeps, per partition, the rows below the middle of what
	// was committed and sets the checkpoint there: the state of a backup
	// (or a replica) from earlier in the run.
	restoreHalf := func(t *testing.T, tg lostTarget, before map[int32]group.Checkpoint) {
		cps := tg.ckpt(t)
		for part, cp := range before {
			if cp.Offset <= cp.Start+1 || cps[part] == 0 {
				continue
			}
			mid := cp.Start + (cp.Offset-cp.Start)/2
			tg.exec(t, fmt.Sprintf(`DELETE FROM %%[1]s WHERE "partition" = %d AND "offset" >= %d`, part, mid))
			tg.exec(t, fmt.Sprintf(`UPDATE %%[2]s SET next_offset = %d WHERE "partition" = %d`, mid, part))
		}
	}
	for _, tc := range []struct {
		name   string
		target func(t *testing.T) lostTarget
		lose   func(t *testing.T, tg lostTarget, before map[int32]group.Checkpoint)
	}{
		{"postgres/drop", func(t *testing.T) lostTarget { return postgresLost(t, true) },
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `DROP TABLE %[1]s`) }},
		{"postgres/truncate", func(t *testing.T) lostTarget { return postgresLost(t, true) },
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `TRUNCATE %[1]s`) }},
		{"postgres/truncate_both", func(t *testing.T) lostTarget { return postgresLost(t, true) },
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `TRUNCATE %[1]s, %[2]s`) }},
		{"postgres/restore", func(t *testing.T) lostTarget { return postgresLost(t, true) }, restoreHalf},
		{"postgres/no_checkpoint_table/drop", func(t *testing.T) lostTarget { return postgresLost(t, false) },
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `DROP TABLE %[1]s`) }},
		{"postgres/no_checkpoint_table/truncate", func(t *testing.T) lostTarget { return postgresLost(t, false) },
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `TRUNCATE %[1]s`) }},
		{"sqlite/delete", sqliteLost,
			func(t *testing.T, tg lostTarget, _ map[int32]group.Checkpoint) { tg.exec(t, `DELETE FROM %[1]s`) }},
		{"sqlite/restore", sqliteLost, restoreHalf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.target(t)
			p := lostPlan(t, tg)
			before := interruptRun(t, p, 7, nil)
			tc.lose(t, tg, before)
			job, _, err := runResumed(t, p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			want := sorted(allCoords(job))
			got := tg.coords(t)
			if !slices.Equal(got, want) {
				t.Errorf("the table after the resume: %d rows, want the window's %d exactly once: %s", len(got), len(want), diff(want, got))
			}
			// A resume after the finished one changes nothing and succeeds.
			if _, _, err := runResumed(t, p, testOptions(t)); err != nil {
				t.Fatal(err)
			}
			if got := tg.coords(t); !slices.Equal(got, want) {
				t.Errorf("a re-run of the finished plan left %d rows, want %d", len(got), len(want))
			}
			// The table emptied after the plan finished: a re-run writes the
			// window again instead of finding nothing to do.
			tg.exec(t, `DELETE FROM %[1]s`)
			if _, _, err := runResumed(t, p, testOptions(t)); err != nil {
				t.Fatal(err)
			}
			if got := tg.coords(t); !slices.Equal(got, want) {
				t.Errorf("a re-run after the table of the finished plan was emptied left %d rows, want %d", len(got), len(want))
			}
		})
	}
}
