package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlite"
)

// mappedColumns holds every field under a name of its own, in an order
// unlike the default layout's.
var mappedColumns = plan.Columns{
	{Name: "src_offset", Field: "offset"},
	{Name: "id", Field: "key"},
	{Name: "doc", Field: "value"},
	{Name: "customer", Field: "value.customer.id"},
	{Name: "trace", Field: "header.trace"},
	{Name: "kafka_key", Field: "kafka_key"},
	{Name: "src_topic", Field: "topic"},
	{Name: "src_partition", Field: "partition"},
	{Name: "ts", Field: "timestamp"},
	{Name: "hdrs", Field: "headers"},
}

func TestSQLiteColumnsConformance(t *testing.T) {
	h := &sqliteHarness{columns: mappedColumns}
	sinktest.RunWith(t, h, h.features())
}

// columnRecords exercise each field: paths that exist, are missing, are
// null, select objects and numbers; repeated and absent headers; absent
// keys, a value that is not JSON and a tombstone.
func columnRecords() []record.Record {
	r1 := sinktest.Rec(0, 1, "k-1", `{"customer":{"id":"c-7"},"n":1}`)
	r1.Headers = []record.Header{{Key: "trace", Value: []byte("a")}, {Key: "trace", Value: []byte("b\xff")}}
	r2 := sinktest.Rec(0, 2, "", `{"customer":{"id":12345678901234567890}}`)
	r3 := sinktest.Rec(0, 3, "k-3", `{"customer":null}`)
	r3.Headers = []record.Header{{Key: "trace"}}
	r4 := sinktest.Rec(0, 4, "k-4", `not json`)
	r5 := sinktest.Rec(0, 5, "k-5", "")
	r6 := sinktest.Rec(0, 6, "k-6", `{"customer":{"id":{"a":[1, 2]}}}`)
	return []record.Record{r1, r2, r3, r4, r5, r6}
}

// columnWant is what columnRecords leave in the mapped columns customer,
// trace and kafka_key ("NULL" for NULL), by offset.
var columnWant = map[int64][3]string{
	1: {"c-7", "b\xff", "k-1"}, // header and Kafka key columns are BLOBs: the bytes as they are
	2: {"12345678901234567890", "NULL", "NULL"},
	3: {"NULL", "NULL", "k-3"},
	4: {"NULL", "NULL", "k-4"},
	5: {"NULL", "NULL", "k-5"},
	6: {`{"a":[1, 2]}`, "NULL", "k-6"},
}

func TestSQLiteColumnsFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s := newSQLite(t, sqlite.Config{Path: path, Table: "orders", CreateTable: true, Columns: mappedColumns})
	sinktest.MustWrite(t, s, columnRecords()...)
	db := openSQLite(t, path)
	rows, err := db.QueryContext(t.Context(), `SELECT src_offset, customer, trace, kafka_key, id, ts FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var off int64
		var customer, trace, kkey sql.NullString
		var id, ts string
		if err := rows.Scan(&off, &customer, &trace, &kkey, &id, &ts); err != nil {
			t.Fatal(err)
		}
		n++
		null := func(s sql.NullString) string {
			if !s.Valid {
				return "NULL"
			}
			return s.String
		}
		if got := [3]string{null(customer), null(trace), null(kkey)}; got != columnWant[off] {
			t.Errorf("offset %d: customer, trace, kafka_key = %q, want %q", off, got, columnWant[off])
		}
		if want := sinktest.Rec(0, off, "", "").Time.Format("2006-01-02T15:04:05.000Z07:00"); id != "orders/0/"+itoa(off) || ts != want {
			t.Errorf("offset %d: id %q, ts %q (want %q)", off, id, ts, want)
		}
	}
	if n != len(columnWant) {
		t.Fatalf("%d rows, want %d", n, len(columnWant))
	}
	var ddl string
	if err := db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_master WHERE name = 'orders'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"src_offset" INTEGER NOT NULL`, `"id" TEXT NOT NULL PRIMARY KEY`, `"customer" TEXT,`, `"ts" TEXT NOT NULL`, `"trace" BLOB`, `"kafka_key" BLOB`} {
		if !strings.Contains(ddl, want) {
			t.Errorf("created table lacks %s:\n%s", want, ddl)
		}
	}
}
