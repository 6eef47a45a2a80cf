package postgres

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/internal/testenv"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// The first shard of a sharded Write waits for the others before its
// commit. When its COPY into the table fails only at the commit (a
// deferred constraint) and it falls back to the upsert, it does not wait
// a second time for shards that already reported: the Write returns the
// error, with the checkpoint not written.
func TestPostgresCopyFallbackAfterWaitDoesNotHang(t *testing.T) {
	dsn := testenv.Postgres(t)
	table, ckpt := testenv.TableName(), testenv.TableName()
	conn := testenv.PgConn(t, dsn)
	q := pgx.Identifier{table}.Sanitize()
	if _, err := conn.Exec(t.Context(), `CREATE TABLE `+q+` (key text PRIMARY KEY, topic text NOT NULL, partition int NOT NULL, "offset" bigint NOT NULL,
"timestamp" timestamptz NOT NULL, value jsonb, value_bytes bytea, kafka_key bytea, headers jsonb NOT NULL,
UNIQUE (value_bytes) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	keyer, err := sinks.NewKeyer("{{ .Key }}")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), Config{DSN: dsn, Table: table, Connections: 2,
		Checkpoints: sqlcheckpoint.Config{Table: ckpt, Group: "g", Fingerprint: "f", RunID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	// Two keys of the first shard with one value (the deferred constraint
	// fails the first shard's commit), one key of the second.
	var batch []record.Record
	var first, second int
	for i := 0; first < 2 || second < 1; i++ {
		key := fmt.Sprint("k", i)
		switch maphash.String(shardSeed, key) % 2 {
		case 0:
			if first < 2 {
				batch = append(batch, sinktest.Rec(0, int64(len(batch)), key, `{"same":true}`))
				first++
			}
		default:
			if second < 1 {
				batch = append(batch, sinktest.Rec(0, int64(len(batch)), key, `{"other":true}`))
				second++
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- sinktest.Keyed(s, keyer).Write(t.Context(), batch) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Write hangs after the COPY of the first shard fell back") // the sink is left open: its Close would wait for the Write
	}
	defer s.Close()
	if err == nil {
		t.Fatal("Write = nil, want the deferred constraint's error")
	}
	if cps, err := s.Checkpoints(t.Context(), "g", "orders"); err != nil || len(cps) != 0 {
		t.Errorf("checkpoints %v (%v), want none", cps, err)
	}
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+q).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows (%v), want the second shard's 1", n, err)
	}
}
