package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/sinks/encode"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// Every value format reads back to the original bytes, in both stagings;
// json and text refuse, as a *record.Error and before writing any of the
// batch, a value they cannot write.
func TestFileValueFormats(t *testing.T) {
	corpus := sinktest.Corpus()
	for _, interleave := range []bool{true, false} {
		for _, f := range []encode.ValueFormat{encode.FormatAuto, encode.FormatBase64, encode.FormatText, encode.FormatJSON} {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			s := newFileSink(t, file.Config{Path: path, RunID: "r", Interleave: interleave, ValueFormat: f})
			var kept []record.Record
			for _, r := range corpus {
				err := s.Write(t.Context(), []record.Record{r})
				if err == nil {
					kept = append(kept, r)
					continue
				}
				var re *record.Error
				if !errors.As(err, &re) || re.Offset != r.Offset || !errors.Is(err, encode.ErrNotJSON) && !errors.Is(err, encode.ErrNotText) {
					t.Fatalf("%s: offset %d: %v, want a *record.Error", f, r.Offset, err)
				}
			}
			if err := s.Finish(t.Context()); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := sinktest.DecodeLines(t, data)
			want := map[encode.ValueFormat]int{encode.FormatAuto: 14, encode.FormatBase64: 14, encode.FormatText: 10, encode.FormatJSON: 7}[f]
			if len(got) != len(kept) || len(kept) != want {
				t.Fatalf("%s: %d lines, %d records accepted, want %d", f, len(got), len(kept), want)
			}
			for i := range kept {
				sinktest.CompareContents(t, got[i], kept[i])
			}
		}
	}
}
