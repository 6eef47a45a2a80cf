package postgres_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/testenv"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
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

// mappedDDL makes the table of mappedColumns by hand, with the value in a
// bytea column: it keeps every byte.
const mappedDDL = `CREATE TABLE %s (src_offset bigint NOT NULL, id text PRIMARY KEY, doc bytea, customer text, trace bytea,
	kafka_key bytea, src_topic text NOT NULL, src_partition int NOT NULL, ts timestamptz NOT NULL, hdrs jsonb NOT NULL)`

// A mapped table passes the conformance suite, under COPY too.
func TestPostgresColumnsConformance(t *testing.T) {
	dsn := testenv.Postgres(t)
	const sel = `src_topic, src_partition, src_offset, ts, doc, hdrs::text`
	t.Run("arrays", func(t *testing.T) {
		h := &pgHarness{dsn: dsn, columns: mappedColumns, contents: sel, ddl: mappedDDL}
		sinktest.RunWith(t, h, h.features())
	})
	t.Run("copy", func(t *testing.T) {
		h := &pgHarness{dsn: dsn, columns: mappedColumns, contents: sel, ddl: mappedDDL, copyThreshold: 1}
		sinktest.RunWith(t, h, h.features())
	})
}

// columnRecords exercise each field: paths that exist, are missing, are
// null, select objects and numbers; repeated and absent headers; absent
// keys, a value that is not JSON and a tombstone.
func columnRecords() []record.Record {
	r1 := sinktest.Rec(0, 1, "k-1", `{"customer":{"id":"c-7"},"n":1}`)
	r1.Headers = []record.Header{{Key: "trace", Value: []byte("a")}, {Key: "trace", Value: []byte("b")}}
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
	1: {"c-7", "b", "k-1"},
	2: {"12345678901234567890", "NULL", "NULL"},
	3: {"NULL", "NULL", "k-3"},
	4: {"NULL", "NULL", "k-4"},
	5: {"NULL", "NULL", "k-5"},
	6: {`{"a":[1, 2]}`, "NULL", "k-6"},
}

func derefBytes(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestPostgresColumnsFields(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, Columns: mappedColumns})
	sinktest.MustWrite(t, s, columnRecords()...)
	conn := testenv.PgConn(t, dsn)
	rows, err := conn.Query(t.Context(), `SELECT src_offset, customer, trace, kafka_key, id, ts FROM `+pgx.Identifier{table}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var off int64
		var customer, trace *string
		var kkey []byte
		var id string
		var ts time.Time
		if err := rows.Scan(&off, &customer, &trace, &kkey, &id, &ts); err != nil {
			t.Fatal(err)
		}
		n++
		if got := [3]string{deref(customer), deref(trace), derefBytes(kkey)}; got != columnWant[off] {
			t.Errorf("offset %d: customer, trace, kafka_key = %q, want %q", off, got, columnWant[off])
		}
		if id != "orders/0/"+itoa(off) || !ts.Equal(sinktest.Rec(0, off, "", "").Time) {
			t.Errorf("offset %d: id %q, ts %v", off, id, ts)
		}
	}
	if err := rows.Err(); err != nil || n != len(columnWant) {
		t.Fatalf("%d rows (%v), want %d", n, err, len(columnWant))
	}
	// create_table types the columns after their fields, the key column
	// as the primary key.
	types := map[string]string{}
	trows, err := conn.Query(t.Context(), `SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = $1`, table)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var name, typ, null string
		if err := trows.Scan(&name, &typ, &null); err != nil {
			t.Fatal(err)
		}
		types[name] = typ + " " + null
	}
	for col, want := range map[string]string{
		"id": "text NO", "src_offset": "bigint NO", "src_partition": "integer NO", "ts": "timestamp with time zone NO",
		"doc": "jsonb YES", "hdrs": "jsonb NO", "customer": "text YES", "trace": "text YES", "kafka_key": "bytea YES", "src_topic": "text NO",
	} {
		if types[col] != want {
			t.Errorf("column %s: %q, want %q", col, types[col], want)
		}
	}
}

// A table made by hand with other types (numeric, a varchar, an int key)
// takes the mapped text fields: each value is cast to its column's type,
// through COPY as through arrays.
func TestPostgresColumnsCastToDeclaredTypes(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	for _, threshold := range []int{1, 1000} {
		table := testenv.TableName()
		if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (
	serial_id bigint GENERATED ALWAYS AS IDENTITY,
	order_id bigint PRIMARY KEY,
	amount numeric(10,2) NOT NULL,
	status varchar(20),
	raw json,
	written_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			t.Fatal(err)
		}
		keyer, err := sinks.NewKeyer("{{ .Value.id }}")
		if err != nil {
			t.Fatal(err)
		}
		s := newKeyedPostgres(t, keyer, postgres.Config{DSN: dsn, Table: table, CopyThreshold: threshold, Columns: plan.Columns{
			{Name: "order_id", Field: "key"}, {Name: "amount", Field: "value.amount"}, {Name: "status", Field: "value.status"}}})
		sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{"id":7,"amount":12.5,"status":"paid"}`), sinktest.Rec(0, 2, "", `{"id":8,"amount":"3","status":null}`))
		var sum float64
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT sum(amount)::float8, count(status) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&sum, &n); err != nil {
			t.Fatal(err)
		}
		if sum != 15.5 || n != 1 {
			t.Errorf("threshold %d: sum(amount) %v, count(status) %d; want 15.5 and 1", threshold, sum, n)
		}
	}
}

// Mistakes in the mapping are found when the sink opens.
func TestPostgresColumnsErrors(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := testenv.TableName()
	newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	for _, tc := range []struct {
		name string
		cols plan.Columns
		want string
	}{
		{"no key column", plan.Columns{{Name: "key", Field: "value"}}, "no column holds the idempotency key"},
		{"unknown field", plan.Columns{{Name: "key", Field: "key"}, {Name: "value", Field: "vaule"}}, `unknown field "vaule"`},
		{"column not in the table", plan.Columns{{Name: "key", Field: "key"}, {Name: "customer", Field: "value.customer"}}, `no column customer (the table has key, topic`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, Columns: tc.cols})
			if err == nil {
				s.Close()
				t.Fatal("NewPostgres succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// A cell whose text changes while its type's equality calls it the same
// (numeric 1.0 and 1.00, jsonb {"n":1} and {"n":1.0}) is an update, never
// "unchanged" with the old text left in the row: the change test compares
// such columns as text, in the upsert and in the filter of identical rows.
func TestPostgresUpdateOnTextChange(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for _, threshold := range []int{1, 1000} {
		table := testenv.TableName()
		if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (id text PRIMARY KEY, amt numeric, doc jsonb)`); err != nil {
			t.Fatal(err)
		}
		s := newKeyedPostgres(t, mustKeyer(t, "{{ .Key }}"), postgres.Config{DSN: dsn, Table: table, CopyThreshold: threshold, Columns: plan.Columns{
			{Name: "id", Field: "key"}, {Name: "amt", Field: "value.amt"}, {Name: "doc", Field: "value.d"}}})
		// The second batch finds its row the same and turns on the filter
		// of identical rows for the third.
		for i, v := range []string{`{"amt":1.0,"d":{"n":1}}`, `{"amt":1.0,"d":{"n":1}}`, `{"amt":1.00,"d":{"n":1.0}}`} {
			before := s.Outcomes()
			sinktest.MustWrite(t, s, sinktest.Rec(0, int64(i), "a", v))
			want := [...]sinks.Outcomes{{Inserted: 1}, {Unchanged: 1}, {Updated: 1}}[i]
			wantOutcomes(t, fmt.Sprintf("threshold %d, write %d", threshold, i), delta(s, before), want)
		}
		var amt, doc string
		if err := conn.QueryRow(t.Context(), `SELECT amt::text, doc::text FROM `+pgx.Identifier{table}.Sanitize()).Scan(&amt, &doc); err != nil {
			t.Fatal(err)
		}
		if amt != "1.00" || doc != `{"n": 1.0}` {
			t.Errorf("threshold %d: the row holds amt %s, doc %s; want 1.00 and {\"n\": 1.0}", threshold, amt, doc)
		}
	}
}

// A column declared json is refused when the sink opens: its values would
// travel as jsonb, keys reordered and repeated ones dropped.
func TestPostgresJSONColumnRefused(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (id text PRIMARY KEY, doc json)`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, Columns: plan.Columns{{Name: "id", Field: "key"}, {Name: "doc", Field: "value"}}})
	if err == nil {
		s.Close()
		t.Fatal("a json column was accepted")
	}
	if !strings.Contains(err.Error(), "column doc is json") || !strings.Contains(err.Error(), "jsonb") {
		t.Errorf("error %q does not name the column and the way out", err)
	}
}
