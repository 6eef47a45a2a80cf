package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/registry"
)

// A 25-character value for a user's varchar(10) column is a bad record
// naming the column and the reason, under each on_error: fail stops at
// it, skip counts it, dead_letter writes it to the dead letters; it is
// never stored cut to 10 characters.
func TestPostgresVarcharTooLongIsBadRecord(t *testing.T) {
	dsn := testenv.Postgres(t)
	long := strings.Repeat("x", 25)
	for _, onError := range []string{"fail", "skip", "dead_letter"} {
		t.Run(onError, func(t *testing.T) {
			sb := newTestCluster(t, 1, "orders")
			produceValues(t, sb, 0, `{"id":1,"code":"short"}`, fmt.Sprintf(`{"id":2,"code":%q}`, long), `{"id":3,"code":"ok"}`)
			table := testenv.TableName()
			conn := testenv.PgConn(t, dsn)
			if _, err := conn.Exec(t.Context(), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (id bigint PRIMARY KEY, code varchar(10))`); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			extra := "on_error: " + onError
			if onError == "dead_letter" {
				extra += fmt.Sprintf("\ndead_letter: {type: file, path: %s}", filepath.Join(dir, "dead.jsonl"))
			}
			p := testPlan(t, sb, fmt.Sprintf(`
version: 1
name: varchar
source: {brokers: ["%%ADDR%%"], topic: orders}
group: replay.varchar
window:
  offsets: {0: {from: earliest, to: latest}}
sink:
  type: postgres
  key: '{{ .Value.id }}' 
  dsn: %q
  table: %s
  overwrite: true
  columns: {id: key, code: value.code}
%s
`, dsn, table, extra))
			job, err := Prepare(context.Background(), connect(t, p), p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			s, err := registry.New(t.Context(), p.Sink, sinks.Options{Group: p.Group, RunID: job.RunID(), Fingerprint: job.Resolution.Fingerprint})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rep, err := job.Run(context.Background(), s)
			reason := "column code (character varying(10)): the value.code has 25 characters, more than 10"
			var stored []string
			rows, qerr := conn.Query(t.Context(), `SELECT id || '=' || code FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY id`)
			if qerr != nil {
				t.Fatal(qerr)
			}
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, v)
			}
			switch onError {
			case "fail":
				var pe *PartitionError
				if !errors.As(err, &pe) || pe.Offset != 1 || !strings.Contains(err.Error(), reason) {
					t.Fatalf("Run = %v, want a PartitionError at offset 1 saying %q", err, reason)
				}
				if want := []string{"1=short"}; !slices.Equal(stored, want) {
					t.Errorf("rows %v, want %v", stored, want)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if want := []string{"1=short", "3=ok"}; !slices.Equal(stored, want) {
					t.Errorf("rows %v, want %v (the long value neither stored nor cut)", stored, want)
				}
				errs := sumReports(rep, func(p PartitionReport) map[string]int64 { return p.Errors })
				if errs["sink-rejected"] != 1 {
					t.Errorf("errors %v, want sink-rejected=1", errs)
				}
			}
			if onError == "dead_letter" {
				b, err := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), reason) || !strings.Contains(string(b), long) || strings.Count(string(b), "\n") != 1 {
					t.Errorf("dead letters %s, want the one record with its reason and whole value", b)
				}
			}
		})
	}
}
