package sqlcheckpoint_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/rs/zerolog"
)

// Test helpers shared by this package's tests.

func rec(partition int32, offset int64, key, value string) record.Record {
	r := record.Record{Topic: "orders", Partition: partition, Offset: offset,
		Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(offset) * time.Millisecond)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

func mustWrite(t *testing.T, s sinks.Sink, batch ...record.Record) {
	t.Helper()
	if err := s.Write(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}

const defaultTestDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testDSN returns the DSN of the test database (REPLAY_TEST_POSTGRES_DSN,
// else a local trust-auth server). When it is unreachable the test fails
// under CI, and is skipped loudly elsewhere.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("REPLAY_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = defaultTestDSN
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		conn.Close(ctx)
		return dsn
	}
	where := "the test database"
	if c, perr := pgconn.ParseConfig(dsn); perr == nil {
		where = fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("PostgreSQL at %s is unreachable and CI is set, so the postgres sink tests fail: %v", where, err)
	}
	t.Skipf("!!! SKIPPING postgres sink tests: PostgreSQL at %s is unreachable (%v). Start it "+
		"(pg_ctlcluster --skip-systemctl-redirect <version> main start) or set REPLAY_TEST_POSTGRES_DSN. !!!", where, err)
	return ""
}

// pgConn opens a plain connection for inspecting tables.
func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newTable returns a table name unique to this test run, dropped when t ends.
func newTable(t *testing.T, dsn string) string {
	t.Helper()
	name := fmt.Sprintf("replay_test_%d_%x", time.Now().UnixNano(), rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop table %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop table %s: %v", name, err)
		}
	})
	return name
}

func newPostgres(t *testing.T, cfg postgres.Config) *postgres.Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := postgres.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newSQLite(t *testing.T, cfg sqlite.Config) *sqlite.Sink {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := sqlite.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
