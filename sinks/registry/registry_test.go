package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
)

// A file dead-letter sink stages and publishes dead letters like any file
// sink, idempotently: a re-delivered dead letter replaces itself.
func TestDeadLetterFileSink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	s, err := registry.NewDeadLetter(context.Background(), plan.Sink{Type: "file", Config: &file.Section{Path: path}}, sinks.Options{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := []record.Record{
		sinks.DeadLetter(record.Record{Topic: "orders", Offset: 4, Value: []byte("x")}, "reason 4"),
		sinks.DeadLetter(record.Record{Topic: "orders", Offset: 9, Value: []byte("y")}, "reason 9"),
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
