package postgres_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// A partitioned table is refused when the sink opens, with the reason,
// not at the first write with PostgreSQL's "cannot retrieve a system
// column in this context".
func TestPostgresPartitionedTableRefusedAtOpen(t *testing.T) {
	dsn := testenv.Postgres(t)
	conn := testenv.PgConn(t, dsn)
	table := testenv.TableName()
	q := pgx.Identifier{table}.Sanitize()
	for _, stmt := range []string{
		`CREATE TABLE ` + q + ` (key text PRIMARY KEY, topic text NOT NULL, partition int NOT NULL, "offset" bigint NOT NULL, "timestamp" timestamptz NOT NULL,
	value jsonb, value_bytes bytea, kafka_key bytea, headers jsonb NOT NULL) PARTITION BY HASH (key)`,
		`CREATE TABLE ` + pgx.Identifier{table + "_p0"}.Sanitize() + ` PARTITION OF ` + q + ` FOR VALUES WITH (MODULUS 1, REMAINDER 0)`,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	s, err := postgres.New(t.Context(), postgres.Config{DSN: dsn, Table: table})
	if err == nil {
		defer s.Close()
		err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "k", `{}`)})
	}
	if err == nil || !strings.Contains(err.Error(), "is partitioned") || !strings.Contains(err.Error(), "one of its partitions") {
		t.Errorf("a partitioned table: %v, want it refused at open, saying why and what to do", err)
	}
}
