package sqlcheckpoint_test

import (
	"context"
	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sinktest"
	"testing"

	"github.com/replay-tool/replay/sinks/postgres"
	"github.com/replay-tool/replay/sinks/sqlite"
	"github.com/rs/zerolog"
)

// Test helpers shared by this package's tests.

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

// keyedPostgres is a postgres sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedPostgres struct {
	*postgres.Sink
	keyer *sinks.Keyer
}

func (k keyedPostgres) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedPostgres(t *testing.T, keyer *sinks.Keyer, cfg postgres.Config) keyedPostgres {
	t.Helper()
	return keyedPostgres{newPostgres(t, cfg), keyer}
}
