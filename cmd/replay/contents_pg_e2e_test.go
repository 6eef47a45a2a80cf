package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
)

// The contents corpus produced with kgo and replayed by `replay run` into
// the default PostgreSQL layout reads back (postgres.ReadRecords, the
// documented decoding) as the exact key and value bytes kcat reads from
// the source, and the headers a Kafka client reads; the summary counts
// the rows inserted, and a second run with another group inserts nothing.
func TestReplayKeepsRecordContentsPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb, corpus := seedCorpus(t, 1)
	dir := t.TempDir()
	table := testenv.TableName()
	from := corpus[0].Time
	sink := fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, batch_size: 5, copy_threshold: 3, overwrite: true}", dsn, table)
	for i, want := range []string{fmt.Sprintf("%d inserted", len(corpus)), fmt.Sprintf("%d unchanged", len(corpus))} {
		file := writePlan(t, dir, planSpec{name: fmt.Sprint("contents-pg-", i), addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: sink})
		r := replay(t, "run", "--yes", file)
		if r.code != exitOK {
			t.Fatalf("run %d: %s", i, r)
		}
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("run %d: the summary does not say %q:\n%s", i, want, r)
		}
	}
	got, err := postgres.ReadRecords(t.Context(), testenv.PgConn(t, dsn), table)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b record.Record) int { return int(a.Offset - b.Offset) })
	compareWithSource(t, sb, corpus, got)
}
