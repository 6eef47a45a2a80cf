package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// In a database whose encoding is not UTF-8 (LATIN1 here) the text the
// sink writes arrives as the record holds it, converted by the server:
// "café" in the value and a header reads back as "café", not "cafÃ©"; a
// character LATIN1 lacks (€) makes its record a bad record, not a
// mangled row. A DSN that sets another client_encoding is refused.
func TestPostgresNonUTF8Database(t *testing.T) {
	dsn := testenv.Postgres(t)
	admin := testenv.PgConn(t, dsn)
	db := fmt.Sprintf("replay_latin1_%x", rand.Uint64())
	if _, err := admin.Exec(t.Context(), `CREATE DATABASE `+db+` ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`); err != nil {
		t.Skipf("cannot create a LATIN1 database here: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), `DROP DATABASE `+db+` WITH (FORCE)`) })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	latin1 := dsnWith(t, u.String(), "search_path", "public")
	table := testenv.TableName()
	s := newPostgres(t, postgres.Config{DSN: latin1, Table: table, CreateTable: true, CopyThreshold: 1})
	r := sinktest.Rec(0, 1, "k1", `{"s":"café"}`)
	r.Headers = []record.Header{{Key: "note", Value: []byte("crème")}}
	sinktest.MustWrite(t, s, r)
	check := testenv.PgConn(t, dsnWith(t, latin1, "client_encoding", "UTF8"))
	var v, h string
	if err := check.QueryRow(t.Context(), `SELECT value->>'s', headers->0->>'value' FROM `+pgx.Identifier{table}.Sanitize()).Scan(&v, &h); err != nil {
		t.Fatal(err)
	}
	if v != "café" || h != "crème" {
		t.Errorf("read back value %q and header %q, want \"café\" and \"crème\"", v, h)
	}
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 2, "k2", `{"s":"5 €"}`)})
	var rerr *record.Error
	if !errors.As(err, &rerr) {
		t.Errorf("a value LATIN1 cannot hold: %v, want a bad record", err)
	}
	if _, err := postgres.New(t.Context(), postgres.Config{DSN: dsnWith(t, latin1, "client_encoding", "LATIN1"), Table: table}); err == nil || !strings.Contains(err.Error(), "client_encoding=LATIN1") {
		t.Errorf("a DSN with client_encoding=LATIN1: %v, want it refused", err)
	}
}
