package sinktest

import (
	"bytes"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
)

// DecodeLines decodes JSONL data (AppendJSONL's lines) with
// encode.DecodeJSONL, failing t on a line that does not decode.
func DecodeLines(t testing.TB, data []byte) []record.Record {
	t.Helper()
	var out []record.Record
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		r, err := encode.DecodeJSONL(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		out = append(out, r)
	}
	return out
}
