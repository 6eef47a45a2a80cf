package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/sqlcheckpoint"
)

// Open builds the sink a validated plan section describes. A database
// another process holds locked (SQLITE_BUSY, SQLITE_LOCKED past the busy
// timeout) is opened again, as a locked write is, until the section's
// retry.max_elapsed has passed; each retry is logged.
func Open(ctx context.Context, sp sinks.Spec) (sinks.Sink, error) {
	c := sp.Plan
	cfg := Config{Path: c.Path, Table: c.Table, OnConflict: c.OnConflict, CreateTable: c.CreateTable, Columns: c.Columns, OnTombstone: c.OnTombstone, Version: c.Version,
		Checkpoints: sqlcheckpoint.ConfigOf(sp), Keyer: sp.Keyer, Log: sp.Options.Log}
	return openRetrying(ctx, cfg, time.Duration(c.Retry.MaxElapsed))
}

// openRetrying is New, tried again while the database is locked until
// budget has passed.
func openRetrying(ctx context.Context, cfg Config, budget time.Duration) (*Sink, error) {
	start, wait := time.Now(), 200*time.Millisecond
	for attempt := 1; ; attempt++ {
		s, err := New(ctx, cfg)
		if err == nil {
			return s, nil
		}
		if !sinks.Transient(sqliteTransient(err)) || time.Since(start)+wait > budget {
			if attempt > 1 {
				return nil, fmt.Errorf("%w (after %d attempts in %s, sink.retry.max_elapsed %s)", err, attempt, time.Since(start).Round(time.Millisecond), budget)
			}
			return nil, err
		}
		cfg.Log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Str("path", cfg.Path).Msg("sqlite sink: the database is locked by another connection; opening it again")
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
