package sinks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replay-tool/replay/internal/filter"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestTransient(t *testing.T) {
	rec := &sinks.RecordError{Topic: "orders", Offset: 3, Err: &sinks.TransientError{Err: errors.New("x")}}
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

// A dead letter's JSON line is the record's line with the reason and the
// source coordinates added; the record's own line is unchanged.
func TestDeadLetterJSONL(t *testing.T) {
	r := sinks.Record{Topic: "orders", Partition: 3, Offset: 1200, Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC),
		Key: []byte("k-1"), Value: []byte("not json"), Headers: []sinks.Header{{Key: "h", Value: []byte("v")}}}
	dl := sinks.DeadLetter(r, `filter: the value is not JSON: "quoted"`)
	want := `{"topic":"orders","partition":3,"offset":1200,"timestamp":"2026-11-03T10:00:00.000Z","key":"k-1","value":"not json","headers":[{"key":"h","value":"v"}],` +
		`"error":"filter: the value is not JSON: \"quoted\"","source_topic":"orders","source_partition":3,"source_offset":1200}` + "\n"
	if got := string(sinks.AppendJSONL(nil, &dl)); got != want {
		t.Errorf("dead letter line:\n%s\nwant:\n%s", got, want)
	}
	if got := string(sinks.AppendJSONL(nil, &r)); strings.Contains(got, "error") {
		t.Errorf("the record itself is not a dead letter: %s", got)
	}
	if dl.DeadLetterReason() == "" || r.DeadLetterReason() != "" {
		t.Error("DeadLetterReason")
	}
}

// A file dead-letter sink stages and publishes dead letters like any file
// sink, idempotently: a re-delivered dead letter replaces itself.
func TestDeadLetterFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	s, err := sinks.NewDeadLetterSink(context.Background(), plan.Sink{Type: "file", Path: path}, sinks.Options{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := []sinks.Record{
		sinks.DeadLetter(sinks.Record{Topic: "orders", Offset: 4, Value: []byte("x")}, "reason 4"),
		sinks.DeadLetter(sinks.Record{Topic: "orders", Offset: 9, Value: []byte("y")}, "reason 9"),
	}
	for range 2 {
		if err := s.Write(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if lines := strings.Count(string(b), "\n"); lines != 2 || !strings.Contains(string(b), `"error":"reason 9"`) {
		t.Fatalf("dead letters:\n%s", b)
	}
}

// The filter parses the value once; the key template reuses that parse.
func TestFilterSharesParsedValueWithKey(t *testing.T) {
	prog, err := filter.Compile(`value.status == "paid" && headers.h == "v" && key == "k-1" && partition == 3`)
	if err != nil {
		t.Fatal(err)
	}
	f := filter.New(prog)
	keyer, _ := sinks.NewKeyer("{{ .Value.id }}")
	r := sinks.Record{Topic: "orders", Partition: 3, Offset: 7, Key: []byte("k-1"), Value: []byte(`{"id": 1000000, "status": "paid"}`),
		Headers: []sinks.Header{{Key: "h", Value: []byte("x")}, {Key: "h", Value: []byte("v")}}}
	if ok, err := f.Match(&r); !ok || err != nil {
		t.Fatalf("Match = %v, %v", ok, err)
	}
	r.Value = []byte(`{"id": 2}`) // changed behind the filter's back: the key still sees the parse
	if k, err := keyer.Key(&r); k != "1000000" || err != nil {
		t.Fatalf("Key = %q, %v; want the id parsed by the filter, as written", k, err)
	}
	bad := sinks.Record{Topic: "orders", Offset: 8, Value: []byte("not json")}
	_, err = f.Match(&bad)
	var re *sinks.RecordError
	var fe *filter.EvalError
	if !errors.As(err, &re) || re.Offset != 8 || !errors.As(err, &fe) {
		t.Fatalf("want a *RecordError wrapping a *FilterError, got %v", err)
	}
}
