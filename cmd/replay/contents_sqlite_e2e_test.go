package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// The contents corpus produced to a broker and replayed to SQLite reads
// back from the default layout (kafka_key, value_bytes, headers) as the
// exact key and value bytes kcat reads from the source, and the headers a
// Kafka client reads; the summary counts what SQLite did, and a re-run
// changes nothing.
func TestReplayToSQLiteKeepsRecordContents(t *testing.T) {
	sb, corpus := seedCorpus(t, 1)
	dir := t.TempDir()
	db := filepath.Join(dir, "replay.db")
	from := corpus[0].Time
	sink := fmt.Sprintf("{type: sqlite, path: %q, table: orders, create_table: true, overwrite: true, batch_size: 5}", db)
	file := writePlan(t, dir, planSpec{name: "contents-sqlite", addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: sink})
	r := replay(t, "run", "--yes", file)
	if r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	if want := fmt.Sprintf("sink: %d inserted, 0 updated, 0 unchanged, 0 ignored", len(corpus)); !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("the run does not say %q:\n%s", want, r)
	}
	compareWithSource(t, sb, corpus, readSQLiteRecords(t, db))

	// The same window again (another plan, so another group): nothing
	// changes, and the summary says so.
	again := writePlan(t, dir, planSpec{name: "contents-sqlite-again", addr: sb.Addr, from: from, to: from.Add(time.Minute), sink: sink})
	r = replay(t, "run", "--yes", again)
	if r.code != exitOK {
		t.Fatalf("re-run: %s", r)
	}
	if want := fmt.Sprintf("sink: 0 inserted, 0 updated, %d unchanged, 0 ignored", len(corpus)); !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("the re-run does not say %q:\n%s", want, r)
	}
}

// readSQLiteRecords reads the default layout back as docs/semantics.md says, in
// offset order.
func readSQLiteRecords(t *testing.T, path string) []record.Record {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT kafka_key, kafka_key IS NULL, topic, partition, "offset", "timestamp",
		value_bytes, value_bytes IS NULL, headers FROM orders ORDER BY "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []record.Record
	for rows.Next() {
		var r record.Record
		var keyNull, valueNull bool
		var ts, hs string
		if err := rows.Scan(&r.Key, &keyNull, &r.Topic, &r.Partition, &r.Offset, &ts, &r.Value, &valueNull, &hs); err != nil {
			t.Fatal(err)
		}
		if r.Key == nil && !keyNull {
			r.Key = []byte{} // database/sql scans X'' as nil
		}
		if r.Value == nil && !valueNull {
			r.Value = []byte{}
		}
		if r.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatal(err)
		}
		if r.Headers, err = sqlite.DecodeHeaders(hs); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
