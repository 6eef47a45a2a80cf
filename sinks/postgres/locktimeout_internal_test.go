package postgres

import (
	"net/url"
	"testing"

	"github.com/replay-tool/replay/internal/testenv"
)

// A sharded sink's connections carry a lock_timeout: the default, the
// configured one, or the DSN's unless it is 0 (no timeout, which would let
// a shard wait for good). A sink of one connection keeps the server's.
func TestPostgresShardedConnectionsHaveALockTimeout(t *testing.T) {
	dsn := testenv.Postgres(t)
	var server string
	if err := testenv.PgConn(t, dsn).QueryRow(t.Context(), "SHOW lock_timeout").Scan(&server); err != nil {
		t.Fatal(err)
	}
	withParam := func(v string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("lock_timeout", v)
		u.RawQuery = q.Encode()
		return u.String()
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"one connection", Config{DSN: dsn}, server},
		{"sharded", Config{DSN: dsn, Connections: 2}, "1s"},
		{"sharded, configured", Config{DSN: dsn, Connections: 2, LockTimeout: 1500e6}, "1500ms"},
		{"sharded, the dsn's", Config{DSN: withParam("5s"), Connections: 2}, "5s"},
		{"sharded, the dsn's 0", Config{DSN: withParam("0"), Connections: 2}, "1s"},
		{"sharded, the dsn's 0ms", Config{DSN: withParam("0ms"), Connections: 2}, "1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Table, tc.cfg.CreateTable = testenv.TableName(), true
			s, err := New(t.Context(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got string
			if err := s.pool.QueryRow(t.Context(), "SHOW lock_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("lock_timeout %s, want %s", got, tc.want)
			}
		})
	}
}

func TestZeroDuration(t *testing.T) {
	for v, want := range map[string]bool{"0": true, "00": true, "0ms": true, "0s": true, "0.0s": true, " 0 ": true, "": true,
		"1": false, "10s": false, "0.5s": false, "100": false, "1min": false} {
		if got := zeroDuration(v); got != want {
			t.Errorf("zeroDuration(%q) = %v, want %v", v, got, want)
		}
	}
}
