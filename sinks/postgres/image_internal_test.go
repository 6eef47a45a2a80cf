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

// The filter of identical rows compares a row's cells by their bytes
// (record_image_eq) for every column type the sink writes, the default
// layout's too: a re-run finds every row unchanged and rewrites none, and
// a cell whose text changes is an update.
func TestPostgresIdenticalRowsComparedByImage(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	if _, err := conn.Exec(t.Context(), `DO $$ BEGIN CREATE DOMAIN replay_test_word AS text CHECK (VALUE <> ''); EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("default layout", func(t *testing.T) {
		s, err := New(t.Context(), Config{DSN: dsn, Table: testenv.TableName(), CreateTable: true, Version: "offset"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !strings.Contains(s.st.copyUpsertSame, "record_image_eq") {
			t.Errorf("the filter of identical rows compares as text:\n%s", s.st.copyUpsertSame)
		}
	})
	for _, tc := range []struct {
		decl, field   string
		value, change func(i int) string
	}{
		{"char(8)", "value.x", func(i int) string { return fmt.Sprintf(`{"x":"c%d"}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":"d%d"}`, i) }},
		{"varchar(8)", "value.x", func(i int) string { return fmt.Sprintf(`{"x":"v%d"}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":"w%d"}`, i) }},
		{"replay_test_word", "value.x", func(i int) string { return fmt.Sprintf(`{"x":"w%d"}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":"z%d"}`, i) }},
		{"numeric(6,2)", "value.x", func(i int) string { return fmt.Sprintf(`{"x":%d.5}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":%d.25}`, i) }},
		{"numeric", "value.x", func(i int) string { return fmt.Sprintf(`{"x":%d.5}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":%d.50}`, i) }},
		{"smallint", "value.x", func(i int) string { return fmt.Sprintf(`{"x":%d}`, i) }, func(i int) string { return fmt.Sprintf(`{"x":%d}`, i+1) }},
		{"jsonb", "value", func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) }, func(i int) string { return fmt.Sprintf(`{"n":%d.0}`, i) }},
		{"timestamp", "timestamp", nil, nil},
		{"text", "kafka_key", nil, nil},
	} {
		t.Run(tc.decl, func(t *testing.T) {
			table := testenv.TableName()
			if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (k text PRIMARY KEY, c `+tc.decl+`)`); err != nil {
				t.Fatal(err)
			}
			recs := func(value func(i int) string) []record.Record {
				var out []record.Record
				for i := range 20 {
					v := `{"x":1}`
					if value != nil {
						v = value(i)
					}
					out = append(out, sinktest.Rec(0, int64(i), fmt.Sprint("k", i), v))
				}
				return out
			}
			cfg := Config{DSN: dsn, Table: table, CopyThreshold: 10, Columns: plan.Columns{{Name: "k", Field: "key"}, {Name: "c", Field: tc.field}}}
			first, err := New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			sinktest.MustWrite(t, sinktest.Keyed(first, keyer), recs(tc.value)...)
			s, err := New(t.Context(), cfg) // a table that holds rows: the filter of identical rows
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !strings.Contains(s.st.copyUpsertSame, "record_image_eq") || !strings.Contains(s.st.upsertSame, "record_image_eq") {
				t.Fatalf("the filter of identical rows compares as text:\n%s", s.st.copyUpsertSame)
			}
			xmins := func() string {
				var x string
				if err := conn.QueryRow(t.Context(), `SELECT string_agg(xmin::text, ',' ORDER BY k) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&x); err != nil {
					t.Fatal(err)
				}
				return x
			}
			before := xmins()
			sinktest.MustWrite(t, sinktest.Keyed(s, keyer), recs(tc.value)...)
			if got := s.Outcomes(); got != (sinks.Outcomes{Unchanged: 20}) {
				t.Errorf("re-run: outcomes %+v, want 20 unchanged", got)
			}
			if xmins() != before {
				t.Errorf("the re-run rewrote rows")
			}
			if tc.change != nil {
				sinktest.MustWrite(t, sinktest.Keyed(s, keyer), recs(tc.change)...)
				if got := s.Outcomes(); got != (sinks.Outcomes{Unchanged: 20, Updated: 20}) {
					t.Errorf("changed: outcomes %+v, want 20 updated", got)
				}
			}
		})
	}
}

// The check at open fails where the binary comparison would: on cells
// of different types (here a shape whose declared type, int8, is not the
// one its values are converted to).
func TestPostgresImageCheckFailsOnDissimilarTypes(t *testing.T) {
	sh := sqlShape{table: "t", key: 0, ver: -1, prov: [3]int{-1, -1, -1}, image: true, cols: []pgColumn{
		{name: "k", field: plan.Field{Kind: plan.FieldKey}, send: sendText, decl: declType{sql: "text", base: "text"}},
		{name: "c", field: plan.Field{Kind: plan.FieldPartition}, send: sendInt4, decl: declType{sql: "bigint", base: "int4"}},
	}}
	st := sh.build()
	if st.imageCheck == "" {
		t.Fatal("no check of the binary comparison")
	}
	_, err := testenv.PgConn(t, testenv.Postgres(t)).Exec(t.Context(), st.imageCheck)
	if err == nil || !strings.Contains(err.Error(), "dissimilar") {
		t.Errorf("the check of cells of types bigint and integer = %v, want the dissimilar types refused", err)
	}
}
