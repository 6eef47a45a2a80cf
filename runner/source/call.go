package source

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/segmentio/kafka-go"
)

// call makes one request to the cluster: every broker call of the source
// side goes through it, so that the classification of its errors (and any
// retry policy) lives in one place. op names the request for the caller's
// error messages; call itself adds nothing to a successful answer.
func call[T any](ctx context.Context, op string, do func(context.Context) (T, error)) (T, error) {
	_ = op // the request's name, for a retry policy or metrics
	return do(ctx)
}

// ErrOffsetOutOfRange is the broker's OFFSET_OUT_OF_RANGE: the offset read
// is below the log start (deleted) or above the log end. A *DataLossError
// wraps it.
var ErrOffsetOutOfRange error = kafka.OffsetOutOfRange

// Retriable reports whether a failure to join a group, or of a group call,
// may pass: a rebalance in progress, a coordinator loading or moving, the
// network.
func Retriable(err error) bool {
	var kerr kafka.Error
	var nerr net.Error
	switch {
	case errors.Is(err, kafka.RebalanceInProgress), errors.Is(err, kafka.UnknownMemberId), errors.Is(err, kafka.IllegalGeneration):
		return true
	case errors.As(err, &kerr):
		return kerr.Temporary()
	case errors.As(err, &nerr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	return false
}
