package sinks

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/replay-tool/replay/internal/record"
)

// TransientError marks a sink failure that may pass by itself (see the Sink
// contract): the runner writes the same batch again after a backoff.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }

func (e *TransientError) Unwrap() error { return e.Err }

// Transient reports whether err, returned by Sink.Write, may pass by
// itself: a *TransientError, a timeout (net.Error, context.DeadlineExceeded),
// a connection refused, reset, aborted or cut short, a pgconn connection
// error, or a PostgreSQL error of class 08 (connection), 53 (insufficient
// resources), 57P (shutdown), a serialization failure, a deadlock or a lock
// not available in lock_timeout (55P03: a migration holding the table). A
// *record.Error (one record the sink cannot take) and a cancelled context
// never are.
func Transient(err error) bool {
	var re *record.Error
	switch {
	case err == nil, errors.As(err, &re), errors.Is(err, context.Canceled):
		return false
	}
	var te *TransientError
	if errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || strings.HasPrefix(c, "57P") || c == "40001" || c == "40P01" || c == "55P03"
	}
	var ne net.Error
	var connect *pgconn.ConnectError
	return errors.As(err, &ne) && ne.Timeout() ||
		slices.ContainsFunc([]error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
			syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, io.ErrUnexpectedEOF, net.ErrClosed},
			func(e error) bool { return errors.Is(err, e) }) ||
		errors.As(err, &connect) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}
