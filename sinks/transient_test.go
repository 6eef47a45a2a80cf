package sinks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestTransient(t *testing.T) {
	rec := &record.Error{Topic: "orders", Offset: 3, Err: &sinks.TransientError{Err: errors.New("x")}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("disk on fire"), false},
		{"TransientError", fmt.Errorf("http sink: %w", &sinks.TransientError{Err: errors.New("503 Service Unavailable")}), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"broken pipe", syscall.EPIPE, true},
		{"net timeout", timeoutErr{}, true},
		{"deadline", fmt.Errorf("postgres sink: %w", context.DeadlineExceeded), true},
		{"cancelled", context.Canceled, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"postgres admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"postgres connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"postgres too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"postgres serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"postgres lock not available (lock_timeout)", &pgconn.PgError{Code: "55P03"}, true},
		{"postgres unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"postgres bad data", &pgconn.PgError{Code: "22P02"}, false},
		{"a record error is never transient", rec, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sinks.Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
