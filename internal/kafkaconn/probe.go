package kafkaconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaProbeTimeout bounds the wait for one broker's answer to the probe.
const kafkaProbeTimeout = 5 * time.Second

// maxProbeResponse is the largest ApiVersions response a broker sends in
// practice (a few hundred bytes; a few KB with every API listed).
const maxProbeResponse = 1 << 20

// NotKafkaError reports an address that answered, but not in Kafka's
// protocol: Head is the start of its answer.
type NotKafkaError struct {
	Addr string
	Head []byte
}

func (e *NotKafkaError) Error() string {
	if e.TLS() {
		return fmt.Sprintf("%s is a TLS listener: it answered a plain-text Kafka request with a TLS record (%s)", e.Addr, strconv.Quote(string(e.Head)))
	}
	return fmt.Sprintf("%s is not a Kafka broker: it answered %s, which is not a Kafka response (is it, e.g., PostgreSQL, Redis or HTTP?)",
		e.Addr, strconv.Quote(string(e.Head)))
}

// TLS reports whether the answer starts like a TLS record (a handshake or
// an alert, of TLS 1.0 to 1.3): the port expects TLS.
func (e *NotKafkaError) TLS() bool {
	return len(e.Head) >= 3 && (e.Head[0] == 0x15 || e.Head[0] == 0x16) && e.Head[1] == 3 && e.Head[2] <= 4
}

// ProbeKafka checks that addr answers a Kafka ApiVersions v0 request
// (API key 18, the first request every client sends) with a response of a
// sane size and the same correlation ID, before kafka-go talks to it.
// kafka-go trusts the size and array lengths of whatever comes back: an
// HTTP server, PostgreSQL or a proxy on the port made it allocate gigabytes
// (PostgreSQL's error message starts with 'E', a 1.1 GB "size") for 15 s.
// Plain TCP only: with TLS the handshake fails first on such a port.
//
// It returns nil when the broker answers like Kafka, a *NotKafkaError when
// it answers otherwise, and the network error (dial, EOF, timeout) as is,
// for the caller to explain.
func ProbeKafka(ctx context.Context, addr, clientID string) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(kafkaProbeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	const correlationID = 0x7265706c             // "repl"
	req := binary.BigEndian.AppendUint32(nil, 0) // size, set below
	req = binary.BigEndian.AppendUint16(req, 18) // ApiVersions
	req = binary.BigEndian.AppendUint16(req, 0)  // v0
	req = binary.BigEndian.AppendUint32(req, correlationID)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := conn.Write(req); err != nil {
		return err
	}
	var head [8]byte
	n, err := io.ReadFull(conn, head[:])
	if err != nil {
		if n > 0 {
			return &NotKafkaError{Addr: addr, Head: head[:n]}
		}
		return err
	}
	size, id := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])
	if size < 6 || size > maxProbeResponse || id != correlationID {
		return &NotKafkaError{Addr: addr, Head: head[:]}
	}
	return nil
}

// brokerMayBeOthers reports whether err is about that one broker (down,
// unreachable, silent, hanging up), so that another bootstrap broker may
// answer; not an error every broker would give (credentials, TLS trust).
func brokerMayBeOthers(err error) bool {
	var op *net.OpError
	var nerr net.Error
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return false
	case errors.As(err, &op) && op.Op == "remote error": // a TLS alert
		return false
	case errors.As(err, &op) && (op.Op == "dial" || op.Op == "read" || op.Op == "write"):
		return true
	case errors.As(err, &nerr) && nerr.Timeout():
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
