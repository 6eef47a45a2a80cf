package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replay-tool/replay/internal/record"
)

// Write upserts batch in one transaction committed before Write returns,
// with the batch's checkpoint when the sink has a checkpoint table. A
// batch of more than CopyThreshold rows is copied into a temporary table
// first. A key template failing on a record returns its *record.Error and
// writes nothing; so does a row the database rejects (bad data, a
// constraint) when it can be pinned to one record. Any other failure is a
// plain error, and nothing is written.
func (s *Sink) Write(ctx context.Context, batch []record.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres sink: upsert into %s: %w", s.name, err)
	}
	rows, err := s.rows(batch)
	if err != nil {
		return err
	}
	if len(rows.recs) > s.copyAbove {
		err = s.copyRows(ctx, rows, batch)
	} else {
		err = s.upsertRows(ctx, rows, batch)
	}
	if err != nil {
		return s.upsertError(ctx, rows, err)
	}
	s.log.Debug().Str("table", s.name).Int32("partition", batch[0].Partition).
		Int64("offset", batch[0].Offset).Int("rows", len(rows.recs)).Bool("copy", len(rows.recs) > s.copyAbove).Msg("upserted")
	return nil
}

// upsertRows runs the upsert over arrays: one statement, or with a
// checkpoint two statements in one round trip, which PostgreSQL runs as
// one implicit transaction.
func (s *Sink) upsertRows(ctx context.Context, rows *pgRows, batch []record.Record) error {
	if s.ckpt == nil {
		_, err := s.pool.Exec(ctx, s.upsert, rows.args()...)
		return err
	}
	b := &pgx.Batch{}
	b.Queue(s.upsert, rows.args()...)
	s.ckpt.Queue(b, batch)
	return s.pool.SendBatch(ctx, b).Close()
}

// copyRows copies the rows into a temporary table and upserts them from
// there, with the checkpoint, in one transaction.
func (s *Sink) copyRows(ctx context.Context, rows *pgRows, batch []record.Record) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, s.createTemp); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", copyTable}, s.copyCols, rows.copySource()); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(s.fromTemp)
	if s.ckpt != nil {
		s.ckpt.Queue(b, batch)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// upsertError turns a failed upsert into the error Write returns: a
// *record.Error when the database rejected the data of one row, found by
// probing the rows one by one, else a plain error.
func (s *Sink) upsertError(ctx context.Context, rows *pgRows, err error) error {
	err = fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(err))
	if !rejectsData(err) || ctx.Err() != nil {
		return err
	}
	i, rowErr := s.probe(ctx, rows)
	if i < 0 {
		return err
	}
	return record.NewError(rows.recs[i], fmt.Errorf("postgres sink: upsert into %s: %w", s.name, s.scrub(rowErr)))
}

// rejectsData reports whether err is the database refusing the data of a
// row: a data exception (class 22: bad encoding, a value out of range, JSON
// that PostgreSQL does not take such as \u0000), an integrity constraint
// violation (class 23), or a row too big for an index (54000).
func rejectsData(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23") || pgErr.Code == "54000"
}

// probe finds the row the database rejects: it upserts the rows one
// statement each, pipelined in one round trip inside a transaction that is
// rolled back, so nothing is written. The server skips every statement after
// the first failure, so the first error names the row. It returns -1 when
// no single row fails on its own.
func (s *Sink) probe(ctx context.Context, rows *pgRows) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return -1, nil
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // the probe is never kept
	b := &pgx.Batch{}
	for i := range rows.recs {
		b.Queue(s.upsert, rows.one(i).args()...)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for i := range rows.recs {
		if _, err := br.Exec(); err != nil {
			if rejectsData(err) {
				return i, err
			}
			return -1, nil
		}
	}
	return -1, nil
}
