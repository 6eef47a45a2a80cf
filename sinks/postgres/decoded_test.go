package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// framed is a record whose value (and key) are in the Confluent wire format
// with the decoded JSON the decode stage gives them.
func framed(offset int64, value, key string, valueID, keyID int32) record.Record {
	r := sinktest.Rec(0, offset, "", "")
	r.Value = append([]byte{0, 0, 0, 0, byte(valueID)}, "payload"...)
	d := &record.Decoded{Value: []byte(value), ValueSchemaID: valueID}
	if key != "" {
		r.Key = append([]byte{0, 0, 0, 0, byte(keyID)}, "k"...)
		d.Key, d.KeySchemaID = []byte(key), keyID
	}
	r.Note = &record.Note{Decoded: d}
	return r
}

// With decode:, the default layout stores the decoded value in value, its
// schema id in value_schema_id, the decoded key in kafka_key_json with
// key_schema_id, and the bytes in value_bytes and kafka_key. A re-run is
// unchanged; the same bytes decoded otherwise (another Avro union
// rendering) update the row.
func TestPostgresDecodedDefaultLayout(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	for _, threshold := range []int{1, 1000} {
		table := testenv.TableName()
		s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, CopyThreshold: threshold, DecodedValue: true, DecodedKey: true})
		r := framed(0, `{"id":9223372036854775807,"amount":12.30,"note":{"string":"a"}}`, `{"id":1}`, 7, 3)
		for i, want := range []sinks.Outcomes{{Inserted: 1}, {Unchanged: 1}} {
			before := s.Outcomes()
			sinktest.MustWrite(t, s, r)
			wantOutcomes(t, "write "+itoa(int64(i)), delta(s, before), want)
		}
		var value, keyJSON string
		var raw, kafkaKey []byte
		var vid, kid int
		q := `SELECT value::text, value_bytes, value_schema_id, kafka_key_json::text, kafka_key, key_schema_id FROM ` + pgx.Identifier{table}.Sanitize()
		if err := conn.QueryRow(t.Context(), q).Scan(&value, &raw, &vid, &keyJSON, &kafkaKey, &kid); err != nil {
			t.Fatal(err)
		}
		if value != `{"id": 9223372036854775807, "note": {"string": "a"}, "amount": 12.30}` || vid != 7 || string(raw) != string(r.Value) {
			t.Errorf("threshold %d: value %s, schema id %d, bytes %q; want the decoded value, 7 and the record's bytes", threshold, value, vid, raw)
		}
		if keyJSON != `{"id": 1}` || kid != 3 || string(kafkaKey) != string(r.Key) {
			t.Errorf("threshold %d: key %s, schema id %d, bytes %q; want the decoded key, 3 and the record's bytes", threshold, keyJSON, kid, kafkaKey)
		}
		tagged := r
		tagged.Note = &record.Note{Decoded: &record.Decoded{Value: []byte(`{"id":9223372036854775807,"amount":12.30,"note":"a"}`), ValueSchemaID: 7, Key: []byte(`{"id":1}`), KeySchemaID: 3}}
		before := s.Outcomes()
		sinktest.MustWrite(t, s, tagged)
		wantOutcomes(t, "the same bytes decoded otherwise", delta(s, before), sinks.Outcomes{Updated: 1})
	}
}

// A table first written without decode: is refused by a plan that decodes,
// naming the missing columns and the ALTER TABLE that adds them; once
// added, a re-run rewrites the rows with the decoded value.
func TestPostgresDecodedStaleTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	r := framed(0, `{"id":1}`, "", 5, 0)
	plain := r
	plain.Note = nil
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true})
	sinktest.MustWrite(t, s, plain)
	_, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table, CreateTable: true, DecodedValue: true})
	if err == nil {
		t.Fatal("a table without value_schema_id was accepted by a decoding plan")
	}
	alter := "ALTER TABLE " + pgx.Identifier{table}.Sanitize() + ` ADD COLUMN "value_schema_id" integer`
	if !strings.Contains(err.Error(), alter) || !strings.Contains(err.Error(), "did not decode") {
		t.Fatalf("error %q does not name the column and %s", err, alter)
	}
	if _, err := conn.Exec(t.Context(), alter); err != nil {
		t.Fatal(err)
	}
	s = newPostgres(t, postgres.Config{DSN: dsn, Table: table, DecodedValue: true})
	before := s.Outcomes()
	sinktest.MustWrite(t, s, r)
	wantOutcomes(t, "a re-run that decodes", delta(s, before), sinks.Outcomes{Updated: 1})
	var value string
	var vid int
	if err := conn.QueryRow(t.Context(), `SELECT value::text, value_schema_id FROM `+pgx.Identifier{table}.Sanitize()).Scan(&value, &vid); err != nil {
		t.Fatal(err)
	}
	if value != `{"id": 1}` || vid != 5 {
		t.Errorf("the row holds %s, schema id %d; want the decoded value and 5", value, vid)
	}
}

// Mapped columns read the decoded value: a decimal into numeric(p,s) is
// stored exactly or is a bad record, a long into bigint stays exact, and
// a bytea column mapped to value keeps the record's bytes.
func TestPostgresDecodedColumns(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (k text PRIMARY KEY, amount numeric(10,2), id bigint, doc jsonb, raw bytea)`); err != nil {
		t.Fatal(err)
	}
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, DecodedValue: true, Columns: plan.Columns{
		{Name: "k", Field: "key"}, {Name: "amount", Field: "value.amount"}, {Name: "id", Field: "value.id"}, {Name: "doc", Field: "value"}, {Name: "raw", Field: "value"}}})
	r := framed(0, `{"id":9223372036854775807,"amount":12.30}`, "", 7, 0)
	sinktest.MustWrite(t, s, r)
	var amount, id, doc string
	var raw []byte
	if err := conn.QueryRow(t.Context(), `SELECT amount::text, id::text, doc::text, raw FROM `+pgx.Identifier{table}.Sanitize()).Scan(&amount, &id, &doc, &raw); err != nil {
		t.Fatal(err)
	}
	if amount != "12.30" || id != "9223372036854775807" || doc != `{"id": 9223372036854775807, "amount": 12.30}` || string(raw) != string(r.Value) {
		t.Errorf("the row holds amount %s, id %s, doc %s, raw %q", amount, id, doc, raw)
	}
	err := s.Write(t.Context(), []record.Record{framed(1, `{"id":1,"amount":12.345}`, "", 7, 0)})
	var re *record.Error
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column amount") || !strings.Contains(err.Error(), "rounded") {
		t.Errorf("a decimal numeric(10,2) would round: error %v, want the record's error naming the column", err)
	}
}

// A decoded float's negative zero is a value jsonb cannot hold as it is
// (numeric has no -0): value and kafka_key_json are NULL, not 0, while a
// plain JSON value's -0 is a number like 0.
func TestPostgresDecodedNegativeZero(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, CreateTable: true, DecodedValue: true, DecodedKey: true})
	plain := sinktest.Rec(0, 2, "k", `{"d":-0.0}`)
	sinktest.MustWrite(t, s, framed(0, `{"d":-0.0}`, `{"k":-0}`, 7, 3), framed(1, `{"d":-1.5,"e":0}`, `{"k":-0.5}`, 7, 3), plain)
	rows, err := conn.Query(t.Context(), `SELECT "offset", value::text, kafka_key_json::text FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var off int64
		var v, k *string
		err := r.Scan(&off, &v, &k)
		str := func(p *string) string {
			if p == nil {
				return "NULL"
			}
			return *p
		}
		return itoa(off) + " " + str(v) + " " + str(k), err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`0 NULL NULL`, `1 {"d": -1.5, "e": 0} {"k": -0.5}`, `2 {"d": 0.0} NULL`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A decoded value holding a float's -0.0 in one field keeps the other
// fields in the columns mapped to their paths, and a double precision
// column mapped to the -0.0 keeps its sign; a jsonb column mapped to the
// -0.0 (which jsonb would store as 0) makes the record a bad record that
// says so.
func TestPostgresDecodedNegativeZeroColumns(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (k text PRIMARY KEY, amount numeric(10,2), id bigint, d double precision, dj jsonb)`); err != nil {
		t.Fatal(err)
	}
	s := newPostgres(t, postgres.Config{DSN: dsn, Table: table, DecodedValue: true, Columns: plan.Columns{
		{Name: "k", Field: "key"}, {Name: "amount", Field: "value.amount"}, {Name: "id", Field: "value.id"}, {Name: "d", Field: "value.d"}}})
	sinktest.MustWrite(t, s, framed(0, `{"id":9223372036854775807,"amount":12.30,"d":-0}`, "", 7, 0))
	var amount, id, d *string
	q := `SELECT amount::text, id::text, d::text FROM ` + pgx.Identifier{table}.Sanitize()
	if err := conn.QueryRow(t.Context(), q).Scan(&amount, &id, &d); err != nil {
		t.Fatal(err)
	}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	if got, want := strings.Join([]string{str(amount), str(id), str(d)}, " "), "12.30 9223372036854775807 -0"; got != want {
		t.Errorf("amount, id, d: %s; want %s", got, want)
	}
	sj := newPostgres(t, postgres.Config{DSN: dsn, Table: table, DecodedValue: true, Columns: plan.Columns{
		{Name: "k", Field: "key"}, {Name: "dj", Field: "value.d"}}})
	err := sj.Write(t.Context(), []record.Record{framed(1, `{"d":-0.0}`, "", 7, 0)})
	var re *record.Error
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column dj") || !strings.Contains(err.Error(), "-0.0") {
		t.Errorf("value.d -0.0 into jsonb: error %v, want the record's error naming the column and the -0.0", err)
	}
	sv := newPostgres(t, postgres.Config{DSN: dsn, Table: table, DecodedValue: true, Columns: plan.Columns{
		{Name: "k", Field: "key"}, {Name: "amount", Field: "value.amount"}, {Name: "dj", Field: "value"}}})
	err = sv.Write(t.Context(), []record.Record{framed(2, `{"d":-0.0}`, "", 7, 0)})
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column dj") || !strings.Contains(err.Error(), "-0.0") {
		t.Errorf("value with a -0.0 into jsonb: error %v, want the record's error naming the column and the -0.0", err)
	}
	// numeric has no -0 either: a decoded float's -0.0 would be stored as 0.
	err = s.Write(t.Context(), []record.Record{framed(3, `{"amount":-0.0,"id":1}`, "", 7, 0)})
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "column amount") || !strings.Contains(err.Error(), "-0.0") {
		t.Errorf("value.amount -0.0 into numeric: error %v, want the record's error naming the column and the -0.0", err)
	}
	// A plain JSON value's -0 is a number's spelling, which numeric
	// normalises as jsonb does.
	sp := newPostgres(t, postgres.Config{DSN: dsn, Table: table, Columns: plan.Columns{{Name: "k", Field: "key"}, {Name: "amount", Field: "value.amount"}}})
	sinktest.MustWrite(t, sp, sinktest.Rec(0, 4, "", `{"amount":-0}`))
}
