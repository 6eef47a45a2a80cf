package postgres_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replay-tool/replay/internal/testenv"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// With a threshold of 1 every batch of two rows or more goes through COPY:
// the conformance suite holds for that path too.
func TestPostgresCopyConformance(t *testing.T) {
	h := &pgHarness{dsn: testenv.Postgres(t), copyThreshold: 1, checkpoints: true}
	sinktest.RunWith(t, h, h.features())
}

// The same window written through COPY and through the upsert over arrays
// leaves identical tables, with duplicate keys inside batches, under both
// conflict policies, and re-delivered on top of what the other path wrote.
func TestPostgresCopyAndArraysSameTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	keyer, err := sinks.NewKeyer("{{ .Partition }}/{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	window := sinktest.Window(40, 3)
	for _, onConflict := range []string{"update", "ignore"} {
		t.Run(onConflict, func(t *testing.T) {
			tables := map[int]map[string]pgRow{}
			for _, threshold := range []int{1, 100000} {
				table := testenv.TableName()
				s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true,
					OnConflict: onConflict, CopyThreshold: threshold})
				for _, part := range window {
					sinktest.MustWrite(t, s, part...) // one batch per partition: keys repeat inside it
				}
				tables[threshold] = withoutXMin(readRows(t, dsn, table))
				// The other path re-delivering the window changes nothing.
				other := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table,
					OnConflict: onConflict, CopyThreshold: 100001 - threshold})
				for _, part := range window {
					sinktest.MustWrite(t, other, part[len(part)/3:]...)
				}
				if got := withoutXMin(readRows(t, dsn, table)); fmt.Sprint(got) != fmt.Sprint(tables[threshold]) {
					t.Errorf("threshold %d: a re-delivery through the other path changed the table", threshold)
				}
			}
			copied, arrays := tables[1], tables[100000]
			if len(copied) == 0 || len(copied) >= len(sinktest.Want(window)) {
				t.Fatalf("%d rows: the window has no duplicate keys to resolve", len(copied))
			}
			if fmt.Sprint(copied) != fmt.Sprint(arrays) {
				t.Errorf("COPY and arrays differ:\nCOPY:   %v\narrays: %v", copied, arrays)
			}
		})
	}
}

func withoutXMin(rows map[string]pgRow) map[string]pgRow {
	for k, r := range rows {
		r.XMin = ""
		rows[k] = r
	}
	return rows
}

// A row PostgreSQL refuses inside a COPY batch is pinned to its record, as
// in the upsert over arrays, and nothing of the batch is written.
func TestPostgresCopyRejectedRowRecordError(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: 1})
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(1, 20, "k1", `{}`), sinktest.Rec(1, 21, randomText(20000), `{}`), sinktest.Rec(1, 22, "k3", `{}`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 21 {
		t.Fatalf("Write = %v, want a *record.Error for offset 21", err)
	}
	if rows := readRows(t, dsn, table); len(rows) != 0 {
		t.Errorf("%d rows written, want none", len(rows))
	}
	sinktest.MustWrite(t, s, sinktest.Rec(1, 20, "k1", `{}`), sinktest.Rec(1, 22, "k3", `{}`))
	if rows := readRows(t, dsn, table); len(rows) != 2 {
		t.Errorf("%d rows after the batch without the poison record, want 2", len(rows))
	}
}
