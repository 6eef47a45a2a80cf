package testenv

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPostgresDSN is the test database when REPLAY_TEST_POSTGRES_DSN is
// not set: a local server with trust authentication.
const DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Postgres returns the DSN of a schema of the test database that only this
// test uses: created empty, first on the search_path of every connection
// made with the DSN (so unqualified table names land in it), and dropped
// with everything in it when t ends. The database is REPLAY_TEST_POSTGRES_DSN,
// else DefaultPostgresDSN. When it is unreachable the test is skipped,
// loudly, or fails when CI is set.
func Postgres(t testing.TB) string {
	t.Helper()
	base := cmp.Or(os.Getenv("REPLAY_TEST_POSTGRES_DSN"), DefaultPostgresDSN)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		where := "the test database"
		if c, perr := pgconn.ParseConfig(base); perr == nil {
			where = fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
		}
		if inCI() {
			t.Fatalf("PostgreSQL at %s is unreachable and CI is set, so the test fails: %v", where, err)
		}
		t.Skipf("!!! SKIPPING: PostgreSQL at %s is unreachable (%v). Start it "+
			"(pg_ctlcluster --skip-systemctl-redirect <version> main start) or set REPLAY_TEST_POSTGRES_DSN. !!!", where, err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("test_%d_%x", time.Now().UnixNano(), rand.Uint32())
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { dropSchema(t, base, ident) })
	return withSearchPath(base, schema)
}

func dropSchema(t testing.TB, dsn, ident string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("drop schema %s: %v", ident, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", ident, err)
	}
}

// withSearchPath adds search_path=schema to dsn, a URL or a keyword/value
// string; pgx sends it as a run-time parameter when it connects.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema
}

// TableName returns a table name no other call in this process returns
// (replay_test_<n>): tables of one test, or of the subtests sharing its
// Postgres schema, do not collide. The schema drops them with it.
func TableName() string {
	return fmt.Sprintf("replay_test_%d", tableSeq.Add(1))
}

var tableSeq atomic.Int64

// PgConn opens a plain connection to dsn for inspecting tables, closed when
// t ends.
func PgConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// PgCoords returns the source coordinates ("partition/offset") of every
// row of table, in the default layout's partition and offset columns, in
// no particular order.
func PgCoords(t testing.TB, dsn, table string) []string {
	t.Helper()
	rows, err := PgConn(t, dsn).Query(t.Context(), `SELECT partition || '/' || "offset" FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
