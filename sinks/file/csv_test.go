package file_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replay-tool/replay/internal/record"
	"github.com/replay-tool/replay/plan"
	"github.com/replay-tool/replay/sinks"
	"github.com/replay-tool/replay/sinks/file"
	"github.com/replay-tool/replay/sinks/registry"
	"github.com/replay-tool/replay/sinks/sinktest"
)

// csvColumns are the columns a CSV conformance target stores: what
// sinktest.Stored holds, plus a key column.
var csvColumns = plan.Columns{
	{Name: "id", Field: "key"}, {Name: "topic", Field: "topic"}, {Name: "partition", Field: "partition"},
	{Name: "offset", Field: "offset"}, {Name: "timestamp", Field: "timestamp"}, {Name: "value", Field: "value"},
	{Name: "headers", Field: "headers"},
}

// outputHarness runs the conformance suite on a file sink with a format
// and per_partition: a target is a path (a pattern with per_partition).
type outputHarness struct {
	paths        sinktest.Targets[string]
	format       string
	perPartition bool
}

func (h *outputHarness) path(t *testing.T) string {
	return h.paths.Get(t, func() string {
		name := "orders." + h.format
		if h.perPartition {
			name = "orders-{partition}." + h.format
		}
		return filepath.Join(t.TempDir(), "out", name)
	})
}

func (h *outputHarness) New(t *testing.T) sinks.Sink {
	cfg := file.Config{Path: h.path(t), RunID: "run-1", Format: h.format, PerPartition: h.perPartition}
	if h.format == "csv" {
		cfg.Columns = csvColumns
	}
	return newFileSink(t, cfg)
}

// newFileSink opens a file sink, closed when t ends. The tests reopen an
// output to play a process restarted after a crash: the sink opened before
// on the same path is closed first, as the death of its process would close
// its files and release its lock on the output.
func newFileSink(t *testing.T, cfg file.Config) *file.Sink {
	t.Helper()
	openFiles.Lock()
	defer openFiles.Unlock()
	if prev, ok := openFiles.m[cfg.Path]; ok {
		_ = prev.Close()
	}
	s, err := file.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	openFiles.m[cfg.Path] = s
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openFiles is the last file sink newFileSink opened on each path.
var openFiles = struct {
	sync.Mutex
	m map[string]*file.Sink
}{m: map[string]*file.Sink{}}

// files returns the output files: the path, or each partition's.
func (h *outputHarness) files(t *testing.T) []string {
	if !h.perPartition {
		return []string{h.path(t)}
	}
	files, err := filepath.Glob(strings.ReplaceAll(h.path(t), "{partition}", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func (h *outputHarness) Contents(t *testing.T) []string {
	var out []string
	for _, f := range h.files(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read output: %v", err)
		}
		var got []string
		if h.format == "csv" {
			got = storedCSV(t, data)
		} else {
			got = storedLines(t, data)
		}
		if h.perPartition {
			p := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "orders-"), "."+h.format)
			for _, s := range got {
				if !strings.HasPrefix(s, "orders/"+p+"@") {
					t.Errorf("%s holds %s", f, s)
				}
			}
		}
		out = append(out, got...)
	}
	return out
}

// storedCSV decodes a CSV output of csvColumns into Stored strings,
// checking its header row.
func storedCSV(t *testing.T, data []byte) []string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatalf("output is not CSV: %v", err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != "id,topic,partition,offset,timestamp,value,headers" {
		t.Fatalf("header row %q", rows[:min(1, len(rows))])
	}
	var out []string
	for _, r := range rows[1:] {
		p, err1 := strconv.ParseInt(r[2], 10, 32)
		o, err2 := strconv.ParseInt(r[3], 10, 64)
		ts, err3 := time.Parse(time.RFC3339Nano, r[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		if r[0] != r[1]+"/"+r[2]+"/"+r[3] {
			t.Errorf("row %q: key %q", r, r[0])
		}
		s := sinktest.Stored{Topic: r[1], Partition: int32(p), Offset: o, Timestamp: ts, Value: json.RawMessage(r[5]), Headers: json.RawMessage(r[6])}
		if r[5] == "" {
			s.Value = json.RawMessage("null") // a tombstone: an empty field
		}
		out = append(out, s.String())
	}
	return out
}

// csvHarness is an outputHarness of CSV files, which hold text only
// (TestCSVRefusesBytesItCannotHold).
type csvHarness struct{ *outputHarness }

func (csvHarness) TextOnly() {}

func TestFileCSVConformance(t *testing.T) {
	h := &outputHarness{format: "csv"}
	sinktest.RunWith(t, csvHarness{h}, features(h.path))
}

func TestFilePerPartitionConformance(t *testing.T) {
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			h := &outputHarness{format: format, perPartition: true}
			if format == "csv" {
				sinktest.RunWith(t, csvHarness{h}, features(h.path))
				return
			}
			sinktest.RunWith(t, h, features(h.path))
		})
	}
}

// The CSV bytes: a header row, RFC 4180 quoting (commas, quotes, line
// breaks, leading spaces), NULL as an empty field, LF line ends; the same bytes however the records were batched.
func TestFileCSVBytes(t *testing.T) {
	cols := plan.Columns{{Name: "offset", Field: "offset"}, {Name: "k", Field: "kafka_key"}, {Name: "status", Field: "value.status"},
		{Name: "n", Field: "value.n"}, {Name: "trace id", Field: "header.trace"}, {Name: "ts", Field: "timestamp"}}
	r1 := sinktest.Rec(0, 1, `a,"b"`, `{"status":"paid, \"late\"\nok","n":1.50}`)
	r1.Headers = []record.Header{{Key: "trace", Value: []byte(" x\u00fc")}}
	r2 := sinktest.Rec(0, 2, "", `not json`)
	r3 := sinktest.Rec(1, 9, "k3", `{"status":null,"n":[1,{"a":2}]}`)
	want := "offset,k,status,n,trace id,ts\n" +
		"1,\"a,\"\"b\"\"\",\"paid, \"\"late\"\"\nok\",1.50,\" x\u00fc\",2026-11-03T10:00:00.001Z\n" +
		"2,,,,,2026-11-03T10:00:00.002Z\n" +
		"9,k3,,\"[1,{\"\"a\"\":2}]\",,2026-11-03T10:00:00.009Z\n"
	for _, batched := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "out.csv")
		s := newFileSink(t, file.Config{Path: path, RunID: "r", Format: "csv", Columns: cols})
		if batched {
			sinktest.MustWrite(t, s, r1, r2)
		} else {
			sinktest.MustWrite(t, s, r1)
			sinktest.MustWrite(t, s, r2)
		}
		sinktest.MustWrite(t, s, r3)
		if err := s.Finish(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("batched=%v:\n got %q\nwant %q", batched, got, want)
		}
	}
}

// An empty window leaves a CSV file with its header row only; with
// per_partition, no file.
func TestFileCSVEmptyWindow(t *testing.T) {
	dir := t.TempDir()
	cols := plan.Columns{{Name: "offset", Field: "offset"}}
	s := newFileSink(t, file.Config{Path: filepath.Join(dir, "out.csv"), RunID: "r", Format: "csv", Columns: cols})
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "out.csv")); err != nil || string(got) != "offset\n" {
		t.Errorf("output %q (%v), want the header row", got, err)
	}
	pp := newFileSink(t, file.Config{Path: filepath.Join(dir, "p-{partition}.csv"), RunID: "r", Format: "csv", Columns: cols, PerPartition: true})
	if err := pp.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "p-*")); len(files) != 0 {
		t.Errorf("per_partition with no records wrote %v", files)
	}
}

// A key column whose template fails on a record reports it, and nothing of
// the batch is staged; without a key column the template is not run.
func TestFileCSVKeyError(t *testing.T) {
	keyer, err := sinks.NewKeyer("{{ .Value.id }}")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := newKeyedFileSink(t, keyer, file.Config{Path: filepath.Join(dir, "out.csv"), RunID: "r", Format: "csv",
		Columns: plan.Columns{{Name: "id", Field: "key"}, {Name: "offset", Field: "offset"}}})
	err = s.Write(t.Context(), []record.Record{sinktest.Rec(0, 1, "", `{"id":1}`), sinktest.Rec(0, 2, "", `plain`)})
	var re *record.Error
	if !errors.As(err, &re) || re.Offset != 2 {
		t.Fatalf("Write = %v, want a *RecordError for offset 2", err)
	}
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{"id":1}`))
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out.csv")); string(got) != "id,offset\n1,1\n" {
		t.Errorf("output %q", got)
	}
	nokey := newKeyedFileSink(t, keyer, file.Config{Path: filepath.Join(dir, "nokey.csv"), RunID: "r", Format: "csv",
		Columns: plan.Columns{{Name: "offset", Field: "offset"}}})
	sinktest.MustWrite(t, nokey, sinktest.Rec(0, 2, "", `plain`))
}

// Each partition's file is published on its own; the others are left
// alone, and a second Finish (after a crash during the first) publishes
// the same files.
func TestFilePerPartitionFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "{partition}", "orders.jsonl")
	s := newFileSink(t, file.Config{Path: path, RunID: "r", PerPartition: true})
	sinktest.MustWrite(t, s, sinktest.Rec(0, 1, "", `{}`), sinktest.Rec(0, 2, "", `{}`))
	sinktest.MustWrite(t, s, sinktest.Rec(5, 1, "", `{}`))
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "orders.jsonl"))
	slices.Sort(files)
	if want := []string{filepath.Join(dir, "0", "orders.jsonl"), filepath.Join(dir, "5", "orders.jsonl")}; !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	if got := storedLines(t, mustRead(t, files[0])); len(got) != 2 {
		t.Errorf("partition 0: %d lines, want 2", len(got))
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFileConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  file.Config
		want string
	}{
		{"csv without columns", file.Config{Format: "csv"}, "needs columns"},
		{"columns with jsonl", file.Config{Columns: plan.Columns{{Name: "o", Field: "offset"}}}, "csv format only"},
		{"unknown format", file.Config{Format: "parquet"}, `format "parquet"`},
		{"unknown field", file.Config{Format: "csv", Columns: plan.Columns{{Name: "o", Field: "ofset"}}}, `did you mean "offset"`},
		{"per_partition without pattern", file.Config{PerPartition: true}, "{partition}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Path = filepath.Join(dir, "out")
			_, err := file.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("file.New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Dead letters in a CSV file carry their reason in the header
// replay-error, and the sink stays a Syncer so the runner fsyncs them
// before committing past them.
func TestFileCSVDeadLetters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.csv")
	s, err := registry.NewDeadLetter(t.Context(), plan.Sink{Type: "file", Config: &file.Section{Path: path, Format: "csv",
		Columns: plan.Columns{{Name: "offset", Field: "offset"}, {Name: "error", Field: "header." + sinks.HeaderError}}}}, sinks.Options{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sy := s.Capabilities().Syncer
	if sy == nil {
		t.Fatal("the CSV dead-letter sink is not a Syncer")
	}
	sinktest.MustWrite(t, s, sinks.DeadLetter(sinktest.Rec(0, 4, "", `x`), "key template: no id"))
	if err := sy.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, path)); got != "offset,error\n4,key template: no id\n" {
		t.Errorf("dead letters %q", got)
	}
}

// A CSV cell holds text: bytes that are not UTF-8 make the record a bad
// record naming the column, never a cell with U+FFFD in it.
func TestCSVRefusesBytesItCannotHold(t *testing.T) {
	cols := plan.Columns{{Name: "id", Field: "key"}, {Name: "payload", Field: "value"}, {Name: "k", Field: "kafka_key"}, {Name: "trace", Field: "header.trace"}}
	tests := []struct {
		name   string
		rec    record.Record
		column string // "" when the record must be written
	}{
		{"utf-8 everywhere", record.Record{Value: []byte(`{"a":"ü"}`), Key: []byte("k"), Headers: []record.Header{{Key: "trace", Value: []byte("t")}}}, ""},
		{"binary value", record.Record{Value: []byte{0x00, 0x01, 0xff, 0xfe}}, "payload"},
		{"binary key", record.Record{Value: []byte(`1`), Key: []byte{0xc3, 0x28}}, "k"},
		{"binary header", record.Record{Value: []byte(`1`), Headers: []record.Header{{Key: "trace", Value: []byte{0xff}}}}, "trace"},
		{"binary header not mapped", record.Record{Value: []byte(`1`), Headers: []record.Header{{Key: "other", Value: []byte{0xff}}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFileSink(t, file.Config{Path: filepath.Join(t.TempDir(), "o.csv"), RunID: "run-1", Format: "csv", Columns: cols})
			r := tt.rec
			r.Topic, r.Partition, r.Offset = "orders", 0, 7
			err := s.Write(t.Context(), []record.Record{r})
			var re *record.Error
			switch {
			case tt.column == "" && err != nil:
				t.Fatalf("Write: %v", err)
			case tt.column != "" && !errors.As(err, &re):
				t.Fatalf("Write: %v, want a *record.Error", err)
			case tt.column != "" && (re.Offset != 7 || !strings.Contains(err.Error(), "column "+tt.column+":") || !strings.Contains(err.Error(), "not UTF-8")):
				t.Errorf("error %q does not name column %s and offset 7", err, tt.column)
			}
		})
	}
}

// Under decode, the value columns read the decoded value: a framed value,
// not UTF-8 itself, is written as its decoded JSON.
func TestCSVDecodedValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.csv")
	s := newFileSink(t, file.Config{Path: path, RunID: "run-1", Format: "csv", Columns: plan.Columns{{Name: "id", Field: "value.id"}, {Name: "value", Field: "value"}}})
	r := sinktest.Rec(0, 3, "k", "\x00\x00\x00\x00\x07\x02\xff")
	r.Note = &record.Note{Decoded: &record.Decoded{Value: []byte(`{"id":9223372036854775807,"amt":12.30}`), ValueSchemaID: 7}}
	sinktest.MustWrite(t, s, r)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(must(os.ReadFile(path))))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != "9223372036854775807" || rows[1][1] != `{"id":9223372036854775807,"amt":12.30}` {
		t.Errorf("rows %q (%v), want the decoded value's id and JSON", rows, err)
	}
}

// The headers column is JSON and keeps every byte: a header value that is
// not UTF-8 is base64 with its value_encoding.
func TestCSVHeadersColumnIsLossless(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.csv")
	s := newFileSink(t, file.Config{Path: path, RunID: "run-1", Format: "csv", Columns: plan.Columns{{Name: "offset", Field: "offset"}, {Name: "headers", Field: "headers"}}})
	r := sinktest.Rec(0, 3, "k", `1`)
	r.Headers = []record.Header{{Key: "bin", Value: []byte{0x00, 0xff, 0x80}}, {Key: "bin", Value: []byte("ü")}, {Key: "none"}}
	sinktest.MustWrite(t, s, r)
	if err := s.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(must(os.ReadFile(path))))).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %q: %v", rows, err)
	}
	want := `[{"key":"bin","value":"AP+A","value_encoding":"base64"},{"key":"bin","value":"ü"},{"key":"none","value":null}]`
	if rows[1][1] != want {
		t.Errorf("headers cell %s, want %s", rows[1][1], want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// keyedFile is a file sink whose records carry keyer's idempotency keys,
// as the runner's key stage sets them.
type keyedFile struct {
	*file.Sink
	keyer *sinks.Keyer
}

func (k keyedFile) Write(ctx context.Context, batch []record.Record) error {
	return sinktest.Keyed(k.Sink, k.keyer).Write(ctx, batch)
}

func newKeyedFileSink(t *testing.T, keyer *sinks.Keyer, cfg file.Config) keyedFile {
	t.Helper()
	return keyedFile{newFileSink(t, cfg), keyer}
}
