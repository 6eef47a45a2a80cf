package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/replay-tool/replay/internal/testenv"
)

// mappingValues are the source values of the mapping runs: two that map,
// one whose product overflows a 64-bit integer (a bad record, skipped), and
// a tombstone (written as it is).
var mappingValues = []string{
	`{"id":1,"cust":"c1","amount":19.99,"qty":3,"debug":{"trace":"t1"}}`,
	`{"id":2,"cust":"c2","amount":0.10,"qty":7}`,
	`{"id":3,"cust":"c3","amount":2,"qty":9223372036854775807}`,
	"",
}

// mappingSection maps the values: the totals exact, cust renamed, debug
// dropped.
const mappingSection = `mapping:
  - set: {total: 'value.amount * value.qty', amount_eur: 'value.amount * 0.92', src: 'topic'}
  - rename: {cust: customer.id}
  - drop: [debug]
on_error: skip
`

// seedMapping produces mappingValues to a one-partition topic orders and
// returns the broker and the first record's time.
func seedMapping(t *testing.T) (*testenv.Kafka, time.Time) {
	t.Helper()
	sb := testenv.NewKafka(t)
	sb.CreateTopic(t, "orders", 1, nil)
	cl := sb.Client(t, kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	from := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i, v := range mappingValues {
		kr := &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i+1), Timestamp: from.Add(time.Duration(i) * time.Second)}
		if v != "" {
			kr.Value = []byte(v)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := cl.ProduceSync(ctx, kr).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	return sb, from
}

// mappingPlan writes a plan replaying the seeded topic into sink with the
// mapping (mappingSection, unless section is given).
func mappingPlan(t *testing.T, dir, name, addr string, from time.Time, sink string, section ...string) string {
	t.Helper()
	file := writePlan(t, dir, planSpec{name: name, addr: addr, from: from, to: from.Add(time.Minute), sink: sink})
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := mappingSection
	if len(section) > 0 {
		m = section[0]
	}
	if _, err := f.WriteString(m); err != nil {
		t.Fatal(err)
	}
	return file
}

// A run maps every value before the sink: the JSONL lines hold the mapped
// values (exact decimals, keys in their order), the overflowing record is
// skipped and counted, and the tombstone stays a tombstone.
func TestReplayMappingJSONL(t *testing.T) {
	sb, from := seedMapping(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	file := mappingPlan(t, dir, "mapping-jsonl", sb.Addr, from, fmt.Sprintf("{type: file, path: %q, key: '{{ .Value.customer.id }}'}", out))
	r := replay(t, "run", "--yes", file)
	if r.code != exitOK {
		t.Fatalf("run: %s", r)
	}
	if !strings.Contains(r.stderr, "overflows a 64-bit integer") || !strings.Contains(r.stdout, "mapping-error=1") {
		t.Errorf("the run does not report the skipped record and why:\n%s", r)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), b)
	}
	for i, want := range []string{
		`"value":{"id":1,"amount":19.99,"qty":3,"total":59.97,"amount_eur":18.3908,"src":"orders","customer":{"id":"c1"}}`,
		`"value":{"id":2,"amount":0.10,"qty":7,"total":0.70,"amount_eur":0.0920,"src":"orders","customer":{"id":"c2"}}`,
		`"key":"k4","value":null`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %s:\n%s", i+1, want, lines[i])
		}
	}
}

// Into PostgreSQL's default layout the value column holds the mapped value
// and value_bytes the bytes as read; the key is read from the mapped value.
// A second run finds every row unchanged; a run with another mapping
// updates them, though value_bytes is the same.
func TestReplayMappingPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	sb, from := seedMapping(t)
	dir := t.TempDir()
	table := testenv.TableName()
	sink := fmt.Sprintf("{type: postgres, dsn: %q, table: %s, create_table: true, key: '{{ .Value.customer.id }}', on_tombstone: skip}", dsn, table)
	for i, want := range []string{"2 inserted, 0 updated, 0 unchanged, 1 ignored", "0 inserted, 0 updated, 2 unchanged, 1 ignored"} {
		file := mappingPlan(t, dir, fmt.Sprint("mapping-pg-", i), sb.Addr, from, sink)
		r := replay(t, "run", "--yes", file)
		if r.code != exitOK {
			t.Fatalf("run %d: %s", i, r)
		}
		if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "mapping-error=1") {
			t.Errorf("run %d: the summary does not say %q and mapping-error=1:\n%s", i, want, r)
		}
	}
	conn := testenv.PgConn(t, dsn)
	rows, err := conn.Query(t.Context(), "SELECT key, value::text, value_bytes FROM "+table+" ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var key, value string
		var raw []byte
		if err := rows.Scan(&key, &value, &raw); err != nil {
			t.Fatal(err)
		}
		got = append(got, key+" "+value+" "+string(raw))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`c1 {"id": 1, "qty": 3, "src": "orders", "total": 59.97, "amount": 19.99, "customer": {"id": "c1"}, "amount_eur": 18.3908} ` + mappingValues[0],
		`c2 {"id": 2, "qty": 7, "src": "orders", "total": 0.70, "amount": 0.10, "customer": {"id": "c2"}, "amount_eur": 0.0920} ` + mappingValues[1],
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rows.Close()

	other := strings.Replace(mappingSection, "value.amount * 0.92", "value.amount * 0.93", 1)
	file := mappingPlan(t, dir, "mapping-pg-other", sb.Addr, from, sink, other)
	if r := replay(t, "run", "--yes", file); r.code != exitOK || !strings.Contains(r.stdout, "0 inserted, 2 updated, 0 unchanged, 1 ignored") {
		t.Fatalf("a run with another mapping does not update the rows: %s", r)
	}
	var eur string
	if err := conn.QueryRow(t.Context(), "SELECT value->>'amount_eur' FROM "+table+" WHERE key = 'c1'").Scan(&eur); err != nil || eur != "18.5907" {
		t.Errorf("amount_eur after the other mapping: %q, %v; want 18.5907", eur, err)
	}
}
